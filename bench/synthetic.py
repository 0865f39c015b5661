"""Synthetic, deterministic bilingual content for the benchmarks (pure: no I/O, no model).

Memories come from templates of things users say (orders, diets, addresses, deploy ports,
birthdays, transfers...), in Chinese and English. A template has two kinds of slots:

- *low-cardinality* slots (``{food_zh}``, ``{city}``, ``{name}``...) are fixed per **pool entry**:
  the pool is a few thousand distinct texts, each embedded once with the real model;
- *high-cardinality* slots (``{order}``, ``{date}``, ``{amount}``, ``{port}``...) are drawn again
  for **every memory**, so entity cues (order numbers, dates, amounts) are as unique as in real
  data while the text stays a near-duplicate of its pool entry (and reuses its vector plus noise).

Cue keys, tags, entities, type and importance are those of the real pipeline: the pool entry's
text goes once through ``shared.ingest.extraction.extract``; a memory's cue keys are the pool entry's
with each sample value replaced by the memory's own value (whole tokens only). That is exact
for these templates (``tests/unit/test_bench_helpers.py`` checks it against the real
``cues_for_memory`` on random fills, and the latency benchmark re-checks a sample of every run),
and about 50 times faster than extracting a million texts.
"""

from __future__ import annotations

import random
import re
import string
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache

# --- vocabularies (low-cardinality slots) ----------------------------------------------------------

LOW: dict[str, tuple[str, ...]] = {
    "item_zh": (
        "耳机",
        "键盘",
        "显示器",
        "咖啡机",
        "跑鞋",
        "背包",
        "台灯",
        "手表",
        "电饭煲",
        "吹风机",
        "平板",
        "路由器",
    ),  # fmt: skip
    "item_en": (
        "headphones",
        "keyboard",
        "monitor",
        "coffee grinder",
        "running shoes",
        "backpack",
        "desk lamp",
        "smart watch",
        "rice cooker",
        "tablet",
        "router",
        "webcam",
    ),  # fmt: skip
    "food_zh": ("香菜", "葱", "蒜", "辣椒", "海鲜", "牛肉", "羊肉", "芹菜", "榴莲", "花生", "蘑菇", "鸡蛋"),
    "food_en": (
        "peanuts",
        "shellfish",
        "gluten",
        "dairy",
        "eggs",
        "soy",
        "sesame",
        "walnuts",
        "shrimp",
        "mushrooms",
        "cilantro",
        "pork",
    ),  # fmt: skip
    "city_zh": (
        "杭州",
        "上海",
        "北京",
        "深圳",
        "成都",
        "南京",
        "苏州",
        "武汉",
        "西安",
        "广州",
        "厦门",
        "重庆",
    ),  # fmt: skip
    "city": (
        "Berlin",
        "Paris",
        "Tokyo",
        "Lisbon",
        "Toronto",
        "Seattle",
        "Madrid",
        "Vienna",
        "Oslo",
        "Dublin",
        "Prague",
        "Sydney",
    ),  # fmt: skip
    "company": ("阿里巴巴", "腾讯", "字节跳动", "华为", "美团", "京东", "百度", "小米", "网易", "携程"),
    "job_zh": ("工程师", "产品经理", "设计师", "老师", "医生", "律师", "会计", "销售", "研究员", "记者"),
    "relation_zh": ("妈妈", "爸爸", "老婆", "老公", "女儿", "儿子", "姐姐", "哥哥", "妹妹", "弟弟"),
    "relation": ("sister", "brother", "mother", "father", "wife", "husband", "daughter", "son", "partner"),
    "name": (
        "Alice",
        "Bob",
        "Carol",
        "David",
        "Emma",
        "Frank",
        "Grace",
        "Henry",
        "Irene",
        "Jack",
        "Karen",
        "Leo",
        "Maria",
        "Nathan",
        "Olivia",
        "Peter",
        "Quinn",
        "Rachel",
        "Sam",
        "Tina",
    ),  # fmt: skip
    "drink_zh": ("乌龙茶", "美式咖啡", "拿铁", "绿茶", "红茶", "豆浆", "酸奶", "椰子水", "普洱", "柠檬水"),
    "drink": (
        "black coffee",
        "green tea",
        "oat latte",
        "espresso",
        "herbal tea",
        "orange juice",
        "sparkling water",
        "matcha",
    ),  # fmt: skip
    "lang": ("Spanish", "Japanese", "German", "French", "Korean", "Italian", "Portuguese", "Russian"),
    "weekday_zh": ("一", "二", "三", "四", "五", "六"),
    "hobby_zh": ("游泳", "跑步", "打羽毛球", "练瑜伽", "学钢琴", "爬山", "打篮球", "画画"),
    "pet": ("cat", "dog", "parrot", "rabbit", "hamster", "turtle"),
    "tool": ("Kubernetes", "Terraform", "Ansible", "Jenkins", "ArgoCD", "Nomad"),
}

# --- high-cardinality slots: a fresh value for every memory -------------------------------------------


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(10 ** (n - 1), 10**n - 1))


HIGH: dict[str, Callable[[random.Random], str]] = {
    "order": lambda r: f"ORD-{r.randint(2019, 2026)}-{_digits(r, 5)}",
    "ticket": lambda r: _digits(r, 5),
    "port": lambda r: str(r.randint(3000, 9999)),
    "date": lambda r: f"{r.randint(2019, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
    "amount": lambda r: _digits(r, 3),
    "rent": lambda r: _digits(r, 4),
    "ref": lambda r: f"{r.choice(('LH', 'CA', 'MU', 'BA', 'AF', 'UA'))}-{_digits(r, 4)}",
    "plate": lambda r: _digits(r, 5),
    "p1": lambda r: _digits(r, 4),
    "p2": lambda r: _digits(r, 4),
    "version": lambda r: f"v{r.randint(1, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}",
    "room": lambda r: _digits(r, 4),
}

# Every template yields exactly one memory whose content is the whole text (checked by the tests).
TEMPLATES: tuple[str, ...] = (
    "我的订单号是{order}，{item_zh}还没到",
    "My order {order} for the {item_en} hasn't arrived yet",
    "我不吃{food_zh}",
    "I'm allergic to {food_en}, please never suggest it",
    "我住在{city_zh}，在{company}做{job_zh}",
    "I live in {city} and work from home on Fridays",
    "生产环境部署端口是{port}",
    "The staging server runs on port {port}",
    "我{relation_zh}的生日是{date}",
    "My {relation}'s birthday is on {date}",
    "提醒我{date}之前给{name}转账{amount}元",
    "Remind me to pay ${amount} to {name} by {date}",
    "我的手机号是138-{p1}-{p2}",
    "My flight to {city} on {date} has booking ref {ref}",
    "记一下，工单#{ticket}是关于{item_zh}退款的",
    "我最喜欢喝{drink_zh}",
    "I prefer {drink} in the morning",
    "下周三要和{name}开会讨论预算",
    "I decided to learn {lang} this year",
    "我每周{weekday_zh}去{hobby_zh}",
    "Remember that my {pet} is called {name}",
    "我的车牌号是浙A-{plate}",
    "Our team uses {tool} for deployment, version {version}",
    "这个月房租是{rent}元，每月15号交",
    "记住：会议室{room}每周五下午归我们组用",
)

# Turns that stay only in the event log (chit-chat, questions, acknowledgements).
CHIT_CHAT: tuple[str, ...] = (
    "好的，谢谢！", "哈哈哈", "嗯嗯", "ok thanks", "sounds good", "你觉得呢？", "What do you think?",
    "晚上好", "Good morning!", "lol", "明白了", "Can you say that again?", "收到", "cool, thanks",
    "这个问题我再想想", "Let me check and get back to you",
)  # fmt: skip
ASSISTANT: tuple[str, ...] = (
    "好的，我记住了。", "Sure, noted.", "没问题，还有什么需要帮忙的吗？", "Got it. Anything else?",
    "我来帮你查一下。", "Here is what I found.", "明白，我会提醒你。", "Okay, I'll keep that in mind.",
)  # fmt: skip

# Questions about the templates' topics without any of their entities: cue matches stay weak, so
# recall goes on to the vector stage.
SEMANTIC_QUERIES: tuple[str, ...] = (
    "我平时不吃什么？", "What am I allergic to?", "我住在哪个城市？", "Where do I live?",
    "我的快递到了吗", "which package is late", "部署用的什么端口", "what port does staging use",
    "家里人什么时候过生日", "when is my family's birthday", "要给谁转钱", "who do I owe money",
    "我喜欢喝什么", "what do I like to drink", "我在学什么外语", "which language am I learning",
    "我的宠物叫什么", "what is my pet's name", "我每周做什么运动", "what sport do I do every week",
    "房租怎么交", "how much is the rent", "会议室什么时候被订了", "when is the meeting room booked",
    "我开什么车", "what is my phone number", "出差的航班", "my upcoming trip",
)  # fmt: skip

_SLOT_RE = re.compile(r"\{(\w+)\}")
_HIGH_SLOTS = frozenset(HIGH)


def slots(template: str) -> list[str]:
    return _SLOT_RE.findall(template)


@cache
def _token_re(value: str) -> re.Pattern[str]:
    """``value`` as a whole token: no letter or digit right before or after it."""
    return re.compile(rf"(?<![0-9A-Za-z]){re.escape(value)}(?![0-9A-Za-z])", re.IGNORECASE)


def substitute(values: Sequence[str], mapping: dict[str, str]) -> list[str]:
    """Replace each sample value (whole tokens, case-insensitively) by its new value, lower-cased
    like the stored keys. ``mapping`` is ``{sample: new}``."""
    patterns = [(_token_re(old), new.lower()) for old, new in mapping.items()]
    out: list[str] = []
    for value in values:
        for pattern, new in patterns:
            value = pattern.sub(new, value)
        out.append(value)
    return out


@dataclass(frozen=True)
class PoolEntry:
    """One distinct text: a template with its low slots fixed and sample values in its high slots."""

    template: int
    low: dict[str, str]
    sample: dict[str, str]  # high slot -> the sample value in ``text``
    text: str

    def fill(self, high: dict[str, str]) -> str:
        return TEMPLATES[self.template].format(**self.low, **high)


def _unique_samples(text: str, sample: dict[str, str], template: str) -> bool:
    """Each sample value occurs as a whole token only where its slot is (so substitution is exact)."""
    counts = {s: slots(template).count(s) for s in sample}
    values = list(sample.values())
    if len(set(values)) != len(values):
        return False
    return all(len(_token_re(v).findall(text)) == counts[s] for s, v in sample.items())


def draw_high(rng: random.Random, template: int) -> dict[str, str]:
    return {s: HIGH[s](rng) for s in dict.fromkeys(slots(TEMPLATES[template])) if s in _HIGH_SLOTS}


def make_pool(size: int, seed: int = 7) -> list[PoolEntry]:
    """``size`` distinct pool texts, deterministic for a seed, cycling through every template."""
    rng = random.Random(seed)
    out: list[PoolEntry] = []
    seen: set[str] = set()
    attempts = 0
    while len(out) < size:
        attempts += 1
        if attempts > size * 50:
            break  # the templates cannot give that many distinct texts
        t = attempts % len(TEMPLATES)
        names = dict.fromkeys(slots(TEMPLATES[t]))
        low = {s: rng.choice(LOW[s]) for s in names if s not in _HIGH_SLOTS}
        sample = draw_high(rng, t)
        text = TEMPLATES[t].format(**low, **sample)
        if text in seen or not _unique_samples(text, sample, TEMPLATES[t]):
            continue
        seen.add(text)
        out.append(PoolEntry(t, low, sample, text))
    return out


@dataclass(frozen=True)
class PoolAnalysis:
    """What the real extraction made of a pool entry's text (one draft, content == text)."""

    type: str
    importance: float
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    cues: tuple[str, ...]


def analyse_entry(entry: PoolEntry, threshold: float = 5.0) -> PoolAnalysis | None:
    """Run the real extraction on the pool text; None when it does not yield exactly one whole-text draft."""
    from shared.events import Role, TurnPublished
    from shared.ingest.extraction import extract

    event = TurnPublished(
        event_id="pool",
        tenant_id="bench",
        user_id="bench",
        session_id="pool",
        seq=1,
        role=Role.USER,
        content=entry.text,
        at=datetime(2025, 1, 1, tzinfo=UTC),
        metadata={},
    )
    result = extract(event, threshold)
    if len(result.drafts) != 1 or result.drafts[0].content != entry.text:
        return None
    d = result.drafts[0]
    return PoolAnalysis(d.type.value, d.importance, tuple(d.tags), tuple(d.entities), tuple(d.cues))


@dataclass
class SyntheticMemory:
    """One row of ``memories`` (everything but the vector, which comes from ``pool`` plus noise)."""

    id: str
    user_id: str
    pool: int
    content: str
    type: str
    importance: float
    status: str
    tags: list[str]
    entities: list[str]
    cues: list[str]
    created_at: datetime
    session_id: str
    seq: int
    event_id: str
    high: dict[str, str] = field(default_factory=dict)


STATUS_WEIGHTS = (("active", 0.94), ("superseded", 0.04), ("archived", 0.02))


def _pick_status(rng: random.Random) -> str:
    x = rng.random()
    for status, weight in STATUS_WEIGHTS:
        if x < weight:
            return status
        x -= weight
    return STATUS_WEIGHTS[0][0]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def generate_memories(
    user_id: str,
    count: int,
    pool: Sequence[PoolEntry],
    analyses: Sequence[PoolAnalysis | None],
    *,
    seed: int,
    now: datetime,
) -> Iterator[SyntheticMemory]:
    """``count`` memories for one user, deterministic for (user, seed); only usable pool entries."""
    usable = [i for i, a in enumerate(analyses) if a is not None]
    if not usable:
        raise ValueError("no pool entry yields a memory")
    rng = random.Random(f"{seed}:{user_id}")
    for n in range(count):
        i = usable[rng.randrange(len(usable))]
        entry, analysis = pool[i], analyses[i]
        assert analysis is not None
        high = draw_high(rng, entry.template)
        mapping = {entry.sample[s]: high[s] for s in entry.sample}
        session = f"s{n // 40}"
        yield SyntheticMemory(
            id=_uuid(rng),
            user_id=user_id,
            pool=i,
            content=entry.fill(high),
            type=analysis.type,
            importance=analysis.importance,
            status=_pick_status(rng),
            tags=list(analysis.tags),
            entities=substitute(analysis.entities, mapping),
            cues=substitute(analysis.cues, mapping),
            created_at=now - timedelta(seconds=rng.randint(0, 365 * 86400)),
            session_id=session,
            seq=n % 40 + 1,
            event_id=_uuid(rng).replace("-", ""),
            high=high,
        )


# --- queries ------------------------------------------------------------------------------------------

_ENTITY_QUERY_FORMS = ("{v} 是什么情况？", "what about {v}?", "{v} 还记得吗", "anything on {v}")


def entity_query(memory: SyntheticMemory, rng: random.Random) -> str | None:
    """A question naming one of the memory's entities with a digit (an id, date, amount, port...)."""
    values = [e for e in memory.entities if any(c.isdigit() for c in e)]
    if not values:
        return None
    return rng.choice(_ENTITY_QUERY_FORMS).format(v=rng.choice(values))


def make_queries(memories: Sequence[SyntheticMemory], count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (kind, query) pairs alternating "entity" (names a stored entity of this user) and
    "semantic" (a topic question with no entity)."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    semantic = list(SEMANTIC_QUERIES)
    rng.shuffle(semantic)
    s = 0
    while len(out) < count:
        if len(out) % 2 == 0 and memories:
            # Not every memory names an entity with a digit: try a few before giving up.
            q = next(
                (q for _ in range(20) if (q := entity_query(memories[rng.randrange(len(memories))], rng))),
                None,
            )
            if q is not None:
                out.append(("entity", q))
                continue
        out.append(("semantic", semantic[s % len(semantic)]))
        s += 1
    return out


# --- chat turns for the ingest benchmark ----------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    user_id: str
    session_id: str
    role: str
    content: str


def make_turns(count: int, users: int = 20, seed: int = 11, memorable: float = 0.55) -> list[Turn]:
    """A realistic mix: ``memorable`` of the turns are user statements worth keeping, the rest
    chit-chat and assistant replies. Deterministic for a seed."""
    rng = random.Random(seed)
    out: list[Turn] = []
    for n in range(count):
        user = f"user-{rng.randrange(users):03d}"
        session = f"{user}-s{n // 200}"
        x = rng.random()
        if x < memorable:
            t = rng.randrange(len(TEMPLATES))
            names = dict.fromkeys(slots(TEMPLATES[t]))
            low = {s: rng.choice(LOW[s]) for s in names if s not in _HIGH_SLOTS}
            out.append(Turn(user, session, "user", TEMPLATES[t].format(**low, **draw_high(rng, t))))
        elif x < memorable + (1 - memorable) * 0.6:
            out.append(Turn(user, session, "user", rng.choice(CHIT_CHAT)))
        else:
            out.append(Turn(user, session, "assistant", rng.choice(ASSISTANT)))
    return out


def random_suffix(rng: random.Random, n: int = 8) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))
