"""The SRC paper's query-embedding baselines with number embedding: LogicE+NE and ConE+NE.

number_embedding (the NE code g), logice / cone (pure operators), plan (query graph -> computation tree),
models (torch modules), losses, runs (run directory files); the resumable trainer over query sets (the
`pipeline train-qe` stage) is pipeline.stages.train_qe, the answering method pipeline.methods.qe (answers in
the same format as SRC).
"""

from pipeline.baselines.models import QE_MODELS, get_qe_model_class

__all__ = ["QE_MODELS", "get_qe_model_class"]
