"""The LLM comparison (paper: "The accuracy of manually annotated queries"): multiple-choice items built
from a soft query set (:mod:`items`, prompt text in :mod:`prompt`), an OpenAI-compatible chat-completions
client that asks a model for the best candidate (:mod:`client`), and accuracy per query type with SRC's
pick on the same items (:mod:`eval`). The `pipeline llm-items` / `llm-eval` stage is
:mod:`pipeline.stages.llm`."""
