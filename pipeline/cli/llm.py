"""`pipeline llm-items` and `pipeline llm-eval`: the LLM comparison's items and scores."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.group import cli, echo_json, friendly, print_table
from pipeline.core.errors import PipelineError


@cli.command("llm-items", short_help="Make multiple-choice items for an LLM from a query set.")
@click.argument("dataset")
@click.option("--queries", "queries_path", required=True, multiple=True, type=click.Path(path_type=str),
              help="A query set (Parquet); repeat to take items from several, in order.")
@click.option("--out", "out_path", required=True, type=click.Path(path_type=str), help="Items file (JSONL).")
@click.option("--margin", type=float, default=0.1, show_default=True,
              help="Least difference between the true utilities of two candidates.")
@click.option("--per-type", default="paper", show_default=True,
              help="Items per type: paper (1p 100, 2p 50, 2i 100, 2in 50, 2il/3in/ip/im 15, 2m 10), all, N or TYPE=N,...")
@click.option("--adjacency", type=click.Path(path_type=str), default=None,
              help="A neural adjacency export: add SRC's pick (highest predicted utility) to every item.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds candidate draws and the answer position.")
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
@friendly
def llm_items_cmd(dataset: str, queries_path: tuple[str, ...], out_path: str, margin: float, per_type: str, adjacency: str | None,
                  seed: int, source: str | None, as_json: bool) -> None:
    """Multiple-choice items (prompt, four named candidates, correct letter) from a query set of DATASET."""
    from pipeline.stages.llm import build_items_file

    res = build_items_file(dataset, list(queries_path), out_path, margin, per_type, seed, adjacency, source)
    if as_json:
        echo_json(res)
        return
    print_table([{"type": t, "items": n} for t, n in res["kept"].items()])
    click.echo(f"{res['file']}: {res['items']} items; dropped: "
               + (", ".join(f"{n} {why}" for why, n in res["dropped"].items()) or "none"))


@cli.command("llm-eval", short_help="Score a language model on multiple-choice items.")
@click.argument("items_path", metavar="ITEMS", type=click.Path(path_type=str))
@click.option("--endpoint", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1.")
@click.option("--model", "model_name", default=None, help="Model name sent to the endpoint.")
@click.option("--concurrency", type=int, default=4, show_default=True, help="Requests in flight.")
@click.option("--responses", type=click.Path(path_type=str), default=None,
              help="Responses JSONL (default beside ITEMS); a re-run resumes from it.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable holding the API key (none sent when unset).")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per request.")
@click.option("--retries", type=int, default=4, show_default=True, help="Retries on 429/5xx/timeouts.")
@click.option("--docs", "docs_dir", type=click.Path(path_type=str), default=None,
              help="Record the accuracy tables in DIR/results_llm.json (e.g. docs; `python tools/pages.py` renders "
                   "the results pages from it).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@friendly
def llm_eval_cmd(items_path: str, endpoint: str | None, model_name: str | None, concurrency: int,
                 responses: str | None, api_key_env: str, timeout: float, retries: int, docs_dir: str | None,
                 as_json: bool) -> None:
    """Accuracy per query type (95% Wilson interval) of a model on ITEMS, beside SRC's when ITEMS has it."""
    from pipeline.llm.eval import markdown
    from pipeline.stages.llm import evaluate_items_file

    if (endpoint is None) != (model_name is None):
        raise PipelineError("give --endpoint and --model together (or neither, for SRC alone)")
    doc = evaluate_items_file(items_path, endpoint, model_name, concurrency, responses, progress=not as_json,
                              api_key_env=api_key_env, timeout=timeout, retries=retries)
    if docs_dir is not None and doc["tables"]:
        from pipeline.stages.llm import record_in_docs

        asked = f" --endpoint {endpoint} --model {model_name}" if endpoint is not None else ""
        from pipeline.stages.docs_data import recorded

        click.echo(recorded([record_in_docs(docs_dir, items_path, doc, f"pipeline llm-eval {Path(items_path).name}{asked}")]),
                   err=True)
    if as_json:
        echo_json(doc)
        return
    if not doc["tables"]:
        click.echo("nothing to score: no --endpoint given and the items carry no SRC pick (llm-items --adjacency)")
        return
    click.echo(markdown(doc["tables"]))
    if endpoint is not None:
        click.echo(f"responses: {doc['responses']}; no clear letter: {len(doc['unclear'])}; "
                   f"failed requests: {len(doc['failed'])} (both counted wrong)")
