"""`cuemem demo`: the whole pipeline on a bundled bilingual conversation, on the embedded default."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from typing import Annotated, Any

import typer

from cli.common import DataDir, settings_for, setup_logging
from cli.recall import why_line
from producers.jsonl import read_jsonl
from producers.publisher import Publisher
from service.operations.recall import recall_for
from service.operations.waiting import wait_for
from shared.models import RECALLABLE_STATUSES
from shared.settings import Settings
from workers.runtime.local import open_runtime

DEMO_USER = "demo-user"
DEMO_NOW = "2026-11-10T09:00:00+08:00"
DEMO_QUERIES = [
    "我有什么忌口？",
    "今晚吃什么好？",
    "生产环境的端口是多少",
    "what's my order number?",
    "扫地机器人又出问题了怎么办",
    "what coffee should I order this afternoon?",
    "where do I work?",
]


def demo_turns() -> list[dict[str, Any]]:
    path = resources.files("cli") / "data" / "demo_conversation.jsonl"
    turns: list[dict[str, Any]] = []
    seqs: dict[str, int] = {}
    with resources.as_file(path) as p:
        for line in read_jsonl(p):
            assert line.data is not None, f"bundled demo line {line.number}: {line.error}"
            data = dict(line.data)
            # Fixed ids and seqs: running the demo twice changes nothing the second time.
            seqs[data["session_id"]] = seqs.get(data["session_id"], 0) + 1
            data.setdefault("seq", seqs[data["session_id"]])
            data.setdefault("event_id", f"demo-{line.number:03d}")
            turns.append(data)
    return turns


def run_demo(
    settings: Settings,
    *,
    echo: Callable[[str], None],
) -> None:
    turns = demo_turns()
    with open_runtime(settings, start_workers=not settings.broker_url, command="cuemem demo") as rt:
        echo(f"cuemem demo — data dir {rt.settings.resolved_data_dir}")
        echo(f"publishing {len(turns)} turns of user {DEMO_USER!r} (Chinese and English)…")
        with Publisher.from_settings(rt.settings) as publisher:
            ids = [publisher.publish_turn(t).ref for t in turns]
        state = wait_for(rt, ids, 600.0, show=False)
        echo(f"processed: {json.dumps(dict(state.counts), ensure_ascii=False)}")
        rt.stop_workers()  # frees the embedded index for this process's searches

        with rt.container.uow() as uow:
            kept = uow.memories.for_user(rt.settings.tenant_id, DEMO_USER, RECALLABLE_STATUSES)
            dropped = [
                e
                for e in uow.events.recent(rt.settings.tenant_id, DEMO_USER, 100)
                if e.stage == "done"
                and not any(s["event_id"] == e.event.event_id for m in kept for s in m.sources)
            ]
        echo(f"\nremembered {len(kept)} memories (of {len(turns)} turns):")
        for m in kept:
            echo(f"  [{m.type.value:<10}] imp {m.importance:>4.1f}  x{m.access_count}  {m.content}")
        echo(
            f"\nkept only in the event log (low importance): {len(dropped)} turns, e.g. "
            + ", ".join(repr(e.event.content) for e in dropped[:3])
        )

        now = datetime.fromisoformat(DEMO_NOW)
        echo("\nrecall:")
        for query in DEMO_QUERIES:
            out = recall_for(rt.container, DEMO_USER, query, k=3, now=now)
            took = out["trace"]["timings_ms"].get("total_ms", 0.0)
            echo(f"\n? {query}   [stage: {out['stage']}, {took:.1f} ms]")
            if not out["items"]:
                echo("   (nothing) " + "; ".join(out["trace"]["notes"]))
            for i, item in enumerate(out["items"], 1):
                echo(f"   {i}. [{item['type']}] {item['content']}   <- {why_line(item['explanation'])}")
        echo("\nTry: cuemem recall --user demo-user '忌口' --json   |   cuemem memories --user demo-user")


def demo(
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Ingest a bundled bilingual conversation, then show what was remembered and a few recalls."""
    setup_logging(verbose)
    run_demo(settings_for(data_dir), echo=typer.echo)
