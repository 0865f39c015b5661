"""`cuemem bench ranker-features` and `cuemem bench train-ranker`, end to end on a tiny
LoCoMo-shaped file the test writes: the console scripts on the embedded default (real worker
processes, the hash embedder), then the features file against a hand count and the model file
against the rules it must keep (features, provenance, data hash, a floor from the curve).

Three conversations with colliding ids (``c-1``, ``c-10``, ``c-100``): the no-answer lines ask
each one's questions of the next one's user, so their candidates come from another conversation
and none may be labelled relevant; a prefix mix-up of event ids would label them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.support.bench import bench_dir
from tests.support.cli import child_env, cuemem

IDS = ("c-1", "c-10", "c-100")
WORDS = {
    "c-1": ("quokkaberry", "marzipanium"),
    "c-10": ("glimmerstone", "thornquill"),
    "c-100": ("velocitrope", "zyxquavormelt"),
}


def _sample(sample_id: str) -> dict[str, Any]:
    first, second = WORDS[sample_id]
    sessions = [
        ["Hey, how was your week?", f"I found a {first} at the market on Saturday.", "That sounds fun."],
        [f"My cousin restores {second} clocks in his garage.", "See you at the park later."],
    ]
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for n, texts in enumerate(sessions, 1):
        conversation[f"session_{n}_date_time"] = f"{n + 1}:05 pm on {n + 2} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D{n}:{i}", "text": t}
            for i, t in enumerate(texts, 1)
        ]
    qa = [
        {"question": f"Where did I find the {first}?", "answer": "x", "evidence": ["D1:2"], "category": 4},
        {"question": f"Who restores {second} clocks?", "answer": "x", "evidence": ["D2:1"], "category": 4},
    ]
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa}


def test_ranker_features_and_train_ranker_end_to_end() -> None:
    from shared.recall.features import FEATURES
    from shared.recall.relevance import RelevanceModel

    with bench_dir() as work:
        data = work / "tiny.json"
        data.write_text(json.dumps([_sample(s) for s in IDS]), encoding="utf-8")
        feats, model_path, report = work / "f.jsonl", work / "model.json", work / "report.json"
        env = child_env(CUEMEM_DATA_DIR=str(work / "data"), CUEMEM_EMBEDDER="hash", TMPDIR=str(work))
        run = cuemem(
            None, "bench", "ranker-features", "--data", str(data), "--out", str(feats),
            "--data-dir", str(work / "data"), "--name", "tiny", env=env,
        )  # fmt: skip
        assert run.code == 0, str(run)

        lines = [json.loads(line) for line in feats.read_text(encoding="utf-8").splitlines()]
        header, questions = lines[0], lines[1:]
        assert header["features"] == list(FEATURES)
        assert header["data_sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
        assert header["samples"] == list(IDS)
        # 2 own questions per conversation, then the same asked of the next conversation's user.
        own = [q for q in questions if not q["foreign"]]
        foreign = [q for q in questions if q["foreign"]]
        assert [(q["sample"], q["asked_of"]) for q in own] == [(s, s) for s in IDS for _ in range(2)]
        assert [(q["sample"], q["asked_of"]) for q in foreign] == [
            (s, IDS[(i + 1) % 3]) for i, s in enumerate(IDS) for _ in range(2)
        ]
        for q in questions:
            assert q["set"] == "tiny"
            for c in q["candidates"]:
                assert len(c["row"]) == len(FEATURES)
        # Each own question's evidence turn is among its candidates (its rare word is only there)
        # and labelled relevant; a foreign question has no evidence and nothing relevant.
        for q in own:
            assert any(set(q["evidence"]) & set(c["dias"]) for c in q["candidates"]), q
        assert all(q["evidence"] == [] for q in foreign)
        assert f"{len(questions)} questions" in run.stdout
        relevant = sum(1 for q in own for c in q["candidates"] if set(q["evidence"]) & set(c["dias"]))
        assert f"{relevant} relevant" in run.stdout

        run = cuemem(
            None, "bench", "train-ranker", "--train", str(feats), "--dev", str(feats),
            "--out", str(model_path), "--report", str(report), "--compare-lightgbm", env=env,
        )  # fmt: skip
        assert run.code == 0, str(run)
        raw = json.loads(model_path.read_text(encoding="utf-8"))
        model = RelevanceModel.from_json(raw)  # refuses another feature list
        assert model.version in run.stdout and model.version.startswith("relevance-lr-")
        training = raw["provenance"]["training"]
        assert training[0]["sha256"] == header["data_sha256"] and training[0]["samples"] == list(IDS)
        assert raw["provenance"]["command"].startswith("cuemem bench train-ranker")
        result = json.loads(report.read_text(encoding="utf-8"))
        # The floor is the highest threshold of the dev curve within the allowed drop of each
        # headline metric.
        curve = result["curves"]["tiny"]
        drops = ("any@5_drop", "all@5_drop", "all@10_drop")
        allowed = [p["threshold"] for p in curve if all(p[d] <= 0.01 for d in drops)]
        assert model.min_relevance == max(allowed)
        assert [p["threshold"] for p in result["no_answer_dev"]["tiny"]] == [model.min_relevance]
        assert result["dev_at_min_relevance"]["tiny"]["questions"] == len(own)
        # The comparison: LightGBM's two objectives measured on the same dev lines.
        assert {k: set(v) for k, v in result["lightgbm"].items()} == {
            "binary": {"tiny"},
            "lambdarank": {"tiny"},
        }
        assert all(v["tiny"]["questions"] == len(own) for v in result["lightgbm"].values())

        # Choosing only the floor again, on the same dev lines, with a stricter model file's floor:
        # the weights stay, the floor is the rule's, the choice is recorded beside the fit.
        raw["min_relevance"] = 0.99
        strict = work / "strict.json"
        strict.write_text(json.dumps(raw), encoding="utf-8")
        refloored_path = work / "refloored.json"
        run = cuemem(
            None, "bench", "train-ranker", "--refloor", str(strict), "--dev", str(feats),
            "--out", str(refloored_path), env=env,
        )  # fmt: skip
        assert run.code == 0, str(run)
        again = json.loads(refloored_path.read_text(encoding="utf-8"))
        assert again["weights"] == raw["weights"] and again["min_relevance"] == model.min_relevance
        assert again["version"] == f"{model.version}-floor{model.min_relevance:g}"
        assert again["provenance"]["refloored"]["from_min_relevance"] == 0.99
        assert again["provenance"]["training"] == training
        run = cuemem(None, "bench", "train-ranker", "--refloor", str(strict), "--train", str(feats), env=env)
        assert run.code == 2 and "give one of" in run.stderr

        # A floor for smaller pools: a model whose floor applied from 1,000 candidates gets one
        # chosen on every pool here (all smaller), never above its own, applying from the fewest
        # own one; its weights and floor stay. The model as fitted has no smaller pool to choose on.
        wide = work / "wide.json"
        wide.write_text(json.dumps(dict(raw, min_relevance=model.min_relevance, min_candidates=1000)))
        extended = work / "extended.json"
        run = cuemem(
            None, "bench", "train-ranker", "--extend-floor", str(wide), "--dev", str(feats),
            "--out", str(extended), env=env,
        )  # fmt: skip
        assert run.code == 0, str(run)
        ext = json.loads(extended.read_text(encoding="utf-8"))
        fewest = min(len(q["candidates"]) for q in own if q["candidates"])
        assert (ext["small_min_candidates"], ext["min_candidates"]) == (fewest, 1000)
        assert 0 < ext["small_min_relevance"] <= model.min_relevance
        assert (ext["weights"], ext["min_relevance"]) == (raw["weights"], model.min_relevance)
        assert set(ext["provenance"]["floor_extended"]["sets"]) == {"tiny"}
        assert f"pools of {fewest} to 999 candidates get the floor {ext['small_min_relevance']}" in run.stdout
        run = cuemem(
            None, "bench", "train-ranker", "--extend-floor", str(model_path), "--dev", str(feats),
            "--out", str(work / "none.json"), env=env,
        )  # fmt: skip
        assert run.code == 2 and "fewer than" in run.stderr and not (work / "none.json").exists(), str(run)

        # Fitting again beside the model in service (--prior), on the same rows: the same fits
        # score no better than it, so it is kept and nothing is written.
        blended, blend_report = work / "blended.json", work / "blend-report.json"
        run = cuemem(
            None, "bench", "train-ranker", "--train", str(feats), "--dev", str(feats), "--prior",
            str(model_path), "--out", str(blended), "--report", str(blend_report), env=env,
        )  # fmt: skip
        assert run.code == 0, str(run)
        assert "nothing written" in run.stdout and not blended.exists()
        result = json.loads(blend_report.read_text(encoding="utf-8"))
        assert result["kept_prior"] == model.version
        prior_row = next(t for t in result["tried"] if t["C"] is None)
        assert prior_row["keeps_prior"] and prior_row["no_answer_empty"] == result["prior_no_answer_empty"]
        assert all(t["score"] <= prior_row["score"] for t in result["tried"] if t["keeps_prior"])
        run = cuemem(
            None, "bench", "train-ranker", "--train", str(feats), "--prior", str(model_path), env=env
        )
        assert run.code == 2 and "--dev" in run.stderr
