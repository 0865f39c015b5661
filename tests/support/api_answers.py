"""Answers of the HTTP API as its clients receive them (recall items, a recall, a memory): the
sample data of the client and agent-tools tests."""

from __future__ import annotations

ITEMS = [
    {
        "id": "m1",
        "content": "我不吃香菜",
        "type": "preference",
        "status": "active",
        "score": 4.0,
        "importance": 9.0,
        "created_at": "2026-11-01T09:00:00+00:00",
        "sources": [{"event_id": "e1", "session_id": "s0", "seq": 1, "at": "2026-11-01T09:00:00+00:00"}],
        "explanation": {"paths": ["cue"], "matched_cues": ["k:香菜", "t:food"], "cue_score": 2.5},
    },
    {
        "id": "m2",
        "content": "生产环境部署端口是8443",
        "type": "fact",
        "status": "active",
        "score": 3.0,
        "importance": 6.5,
        "created_at": "2026-11-02T09:00:00+00:00",
        "sources": [],
        "explanation": {"paths": ["cue"], "matched_cues": ["k:端口"], "cue_score": 1.0},
    },
]

RECALL = {
    "stage": "deterministic",
    "items": ITEMS[:1],
    "trace": {"stage": "deterministic", "notes": []},
    "prompt": "[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-11-01)",
}
MEMORY = {"id": "m1", "content": "我不吃香菜", "type": "preference", "status": "active", "tags": ["food"]}
