"""Rule-based extraction: how important a chat turn is and which memory drafts it yields.

Deterministic and pure: the same turn always gives the same :class:`Extraction`. Importance (0-10)
adds up the weights of the rules that fire (preferences, profile facts, tasks, decisions, key
entities...); chit-chat and questions stay low. A turn that states several different kinds of
fact ("我住杭州，不吃香菜") becomes one draft per kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared import cues
from shared.events import Role, TurnPublished
from shared.models import Extraction, MemoryDraft, MemoryType
from shared.text import word_set

DEFAULT_THRESHOLD = 5.0
MAX_SUMMARY_CHARS = 100
MAX_DRAFT_ENTITIES = 16
MAX_SPLIT_CLAUSES = 24
ELLIPSIS = "…"
_FULL_STOPS = ".。!！?？；; "

_I = re.IGNORECASE
_P, _PR, _T, _F, _E = (MemoryType.PREFERENCE, MemoryType.PROFILE, MemoryType.TASK, MemoryType.FACT,
                       MemoryType.EPISODIC)  # fmt: skip


def _alt(words: str) -> str:
    """A regex alternation group from whitespace-separated words (keeps long word lists readable)."""
    return "(?:" + "|".join(words.split()) + ")"


# Chinese clause start: the subject is often dropped after a comma ("我住杭州，不吃香菜").
_ZS = r"(?:^|(?<=[\s，,。.!！?？;；:：、~～])|我们|我)"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_EVENT = r"(?:meeting|appointment|interview|exam|call|flight|dinner|deadline|doctor)"
_JOBS = (
    r"(?:engineer|developer|programmer|doctor|nurse|teacher|lawyer|accountant|designer|student|manager"
    r"|researcher|professor|scientist|writer|artist|chef|consultant|analyst|founder|freelancer|architect)"
)
_JOBS_ZH = _alt(
    "工程师 程序员 医生 护士 老师 教师 律师 会计 设计师 经理 学生 研究生 博士"
    " 销售 司机 厨师 作家 记者 主管 总监"
)
_FAMILY_ZH = _alt(
    "老婆 老公 妻子 丈夫 爱人 女儿 儿子 孩子 妈妈 爸爸 父母 母亲 父亲 哥哥 姐姐 弟弟 妹妹 男朋友 女朋友 对象"
)
_FAMILY_EN = (
    r"(?:wife|husband|partner|son|daughter|kids?|children|mom|mum|mother|dad|father|parents|brother"
    r"|sister|boyfriend|girlfriend|fianc[ée]e?|dog|cat)"
)


@dataclass(frozen=True)
class _Rule:
    name: str
    weight: float
    type: MemoryType | None
    pattern: re.Pattern[str]
    own_statement: bool  # the speaker about themself: only a user's turn says this about the user


def _any(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives), _I)


_PROHIBITION = _any(
    r"以后(?:不要|别|都|请|记得|用|给我)|别再|不要再|千万(?:别|不要)|请(?:不要|别)|永远(?:不要|别)|从现在(?:开始|起)",
    r"(?:^|[,.;!]\s*|\bplease\s+)(?:never|always)\b|\b(?:don't|do not) ever\b|\bfrom now on\b",
    r"\b(?:please )?(?:don't|do not|stop) (?:use|using|send|sending|call|calling|recommend|recommending"
    r"|suggest|suggesting|give|giving|show|showing|book|booking|mention|mentioning|email|emailing)\b",
)
_PREFERENCE = _any(
    r"我(?:也|还|很|最|特别|比较|超|挺|真的|一直|更|非常)*(?:喜欢|爱吃|爱喝|爱看|爱玩|偏好|偏爱|钟爱|习惯)",
    _ZS + r"(?:也|还|都|从来|一直)?(?:不|从不|不太|不怎么|很少|不爱|没法)(?:吃|喝|喜欢|爱|用|碰|抽)",
    r"讨厌|受不了|忌口|过敏|吃素|素食|不能吃|不能喝|乳糖不耐|最爱",
    r"\bI (?:really |absolutely |just |do |also |still |totally |kind of )*(?:prefer|like|love|enjoy|hate"
    r"|dislike|adore|loathe|can't stand|cannot stand|can't eat|avoid|(?:don't|do not|never) (?:like|eat|"
    r"drink|want|use)|(?:always|usually) (?:eat|drink|use|take|order|get|wear))\b",
    r"\bmy fav(?:ou)?rite\b|\b(?:allergic|allergy|vegetarian|vegan|lactose|gluten)\b",
    r"\bI'm a (?:huge |big )?fan of\b",
)
_PROFILE = _any(
    r"我叫|我的名字|我(?:今年)?\d{1,3}岁|我今年|我的生日|我住|住在|家住|我家在|我(?:的)?老家|我来自|搬到|毕业于",
    r"我在[^，,。]{1,15}(?:工作|上班|实习|读书|上学|任职)|我(?:的)?(?:工作|职业)是",
    r"我(?:是|当)(?:一名|一个|个)?[^，,。]{0,6}" + _JOBS_ZH,
    r"\bmy name is\b|\bI'm called\b|\bcall me\b|\bI(?:'m| am) \d{1,3}(?: years old)?\b|\bmy birthday\b",
    r"\bI (?:live|lived|grew up|was born|moved|relocated) (?:in|to|at)\b",
    r"\bI(?:'m| am) (?:from|based in)\b",
    r"\bmy (?:hometown|home town|address)\b|\bI (?:speak|studied|graduated|majored)\b",
    r"\bI(?:'m| am)? (?:work|worked|working) (?:as|at|for|in|on)\b|\bmy (?:job|role|title|employer)\b",
    rf"\bI(?:'m| am) an? (?:\w+ )?{_JOBS}\b",
)
_TASK = _any(
    r"提醒我|记得(?:要|帮我|提醒|给|带|买|交|去|把)|别忘了|不要忘了|别忘记|待办|截止|我(?:需要|得|必须)",
    r"(?:明天|后天|今晚|下午|晚上|待会|下周.?|周[一二三四五六日天]|\d+号|\d+点)[^，,。]{0,8}?"
    r"(?:要|得|去|开会|见|交|考试|面试|出发|提交)",
    r"\bremind me\b|\bdon't forget\b|\bremember to\b|\bdeadline\b|\bdue (?:on|by|date)\b|\bto-?do\b",
    r"\bI (?:need|have|must|'ve got|got) to\b|\bI(?:'ve| have) (?:a|an) " + _EVENT + r"\b",
    rf"\b(?:tomorrow|tonight|next (?:week|month|{_WEEKDAY})|on {_WEEKDAY})\b.{{0,30}}\b{_EVENT}\b",
    rf"\b{_EVENT}\b.{{0,20}}\b(?:tomorrow|tonight|next (?:week|{_WEEKDAY})|on {_WEEKDAY}|at \d)",
)
# The assistant's own commitments ("I'll remind you"): the one task an assistant turn can state.
_PROMISE = _any(r"\bI(?:'ll| will) remind you\b|我会提醒你|到时(?:候)?提醒你")
_FAMILY = _any(
    r"我(?:的)?" + _FAMILY_ZH,
    r"我(?:有|养了)[一两三\d]?[个只条]?(?:孩子|女儿|儿子|猫|狗)",
    rf"\bmy {_FAMILY_EN}\b",
    r"\bI have (?:a|an|two|three|\d) (?:kids?|children|sons?|daughters?|dogs?|cats?)\b",
)
_DECISION = _any(
    r"决定|定了|就这么定|就用|就选|改用|换成|选定|确定(?:用|了)|拍板|敲定",
    r"\b(?:we|I|they) (?:have |'ve )?(?:decided|chose|picked|settled on|agreed(?: on| to)?)\b",
    r"\blet's (?:go with|use)\b|\b(?:we'll|we will|I'll) (?:go with|stick with)\b",
    r"\b(?:switch|switched|switching|migrate|migrated|migrating) to\b",
)
_REMEMBER = _any(
    r"记住|记一下|帮我记|别忘了我",
    r"\bremember (?:that|this|my)\b|\bkeep in mind\b|\bnote that\b|\bfor (?:future )?reference\b",
)
_EXPERIENCE = _any(
    r"我(?:们)?(?:昨天|前天|上周|上个月|去年|今天|刚才|刚刚|最近|那天)",
    r"去了|买了|看了|参加了|见了|换了|搬了|认识了|开始了|完成了|丢了|赢了|报名了|生了",
    r"\b(?:I|we) (?:just |finally |recently )?(?:went|visited|bought|saw|met|watched|attended|started"
    r"|finished|moved|had|tried|reviewed|discussed|talked|lost|won|joined|left|quit|signed|booked|ordered"
    r"|received|found|made|got|took|adopted|graduated|celebrated)\b",
    r"\b(?:yesterday|last (?:week|month|year|night|weekend|summer|winter|spring|fall))\b",
)
_ISSUE = _any(
    r"坏了|没收到|还没到|没到|报错|故障|失败|出问题|出错|崩溃|打不开|连不上|用不了|丢失",
    r"\b(?:hasn't|has not|haven't|didn't|did not|never) (?:arrived|come|shipped|worked|been delivered)\b",
    r"\bnot working\b|\bbroken\b|\berror\b|\bfail(?:ed|s|ing|ure)?\b|\bcrash(?:ed|es|ing)?\b|\bmissing\b",
    r"\b(?:can't|cannot) (?:log ?in|connect|access|open)\b|\bdoesn't work\b",
)
_OWNERSHIP = _any(
    r"我的(?:订单|账号|账户|工单|快递|包裹|航班|预约|设备|手机|电脑|车|邮箱|电话|地址|项目|服务器)",
    r"\bmy (?:order|account|ticket|package|parcel|flight|booking|reservation|device|phone|laptop|car"
    r"|email|number|address|subscription|plan|server|project|repo)\b",
)
# Weights: a stated preference, profile fact or task alone lifts a user turn (base 1) past 5.
RULES: tuple[_Rule, ...] = (
    _Rule("prohibition", 5.5, _P, _PROHIBITION, False),
    _Rule("preference", 5.0, _P, _PREFERENCE, True),
    _Rule("profile", 5.0, _PR, _PROFILE, True),
    _Rule("task", 5.0, _T, _TASK, True),
    _Rule("promise", 5.0, _T, _PROMISE, False),
    _Rule("family", 4.0, _PR, _FAMILY, True),
    _Rule("decision", 4.5, _F, _DECISION, False),
    _Rule("remember", 4.0, _F, _REMEMBER, False),
    _Rule("experience", 3.0, _E, _EXPERIENCE, True),
    _Rule("issue", 2.0, None, _ISSUE, False),
    _Rule("ownership", 1.5, None, _OWNERSHIP, True),
)
# Type precedence when two typed rules have the same weight.
_TYPE_ORDER = (_P, _PR, _T, _F, _E)
_ENTITY_WEIGHTS = {"id": 3.0, "email": 3.0, "url": 3.0, "money": 2.5, "date": 2.5, "code": 2.5}
_COPULA_RE = re.compile(r"是|为|改成|改为|设为|设置|用的|=|:|：|\b(?:is|are|set to|uses?|runs? on)\b", _I)

_ACK_WORDS = word_set("""
    好的 好吧 好滴 好嘞 好 嗯嗯 嗯 哦哦 哦 噢 啊 呀 啦 吧 呃 额 行 可以 没问题 收到 明白了 明白
    知道了 了解 谢谢你 谢谢 谢了 多谢 感谢 辛苦了 不客气 没事 没关系 对的 对 是的 是啊 你好 您好
    早上好 晚上好 晚安 早 拜拜 再见 嗨 棒 太棒了 厉害 赞 牛 666
    ok okay kk k thanks thank you thx ty lol lmao rofl hi hello hey there bye goodbye good night
    morning cool nice great awesome sure yes yeah yep yup no nope np got it gotcha sounds alright
    all right fine perfect wow oh hmm um uh ah see
""")
_ACK_RE = re.compile(
    r"(?:"
    + "|".join(sorted(map(re.escape, _ACK_WORDS), key=lambda w: (-len(w), w)))
    + r"|[哈呵嘿嘻]+|(?:ha|he)+h?|h+m+)+"
)
_NON_WORD_RE = re.compile(r"[\W_]+")
_CLAUSE_END_RE = re.compile(r"[。！？!?；;\n]+|\.(?=\s|$)|[，,](?!\d)")
_SENTENCE_END_RE = re.compile(r"[。！？!?；;\n]+|\.(?=\s|$)")
_CONJ_ZH_RE = re.compile(r"(?=而且|并且|另外|还有|但是|不过|同时)")
_CONJ_EN_RE = re.compile(r"\s+(?:and|but|while|plus)\s+(?=(?:I|I'm|I've|I'd|my|we|we're|our|he|she|they)\b)")
_WORD_RE = re.compile(r"[A-Za-z0-9']+")
_QUESTION_RE = re.compile(
    r"[?？]\s*$|[吗么呢嘛]\s*[。.!！~]*\s*$|^\s*(?:什么|哪|谁|为什么|怎么|是不是|有没有)"
    r"|^\s*(?:what|where|when|who|why|how|which)\b", _I)  # fmt: skip
_REQUEST_RE = re.compile(
    r"\b(?:can|could|would|will) you\b|\bplease\b|能不能|能否|可以|可不可以|麻烦|帮我", _I
)
_LEAD_FILLER_RE = re.compile(
    r"^(?:(?:嗯+|呃+|额|啊+|哦+|噢|那个|就是|其实|然后|对了|好的|好吧|你好|您好|嗨|而且|并且|另外|还有|同时|不过|但是"
    r"|当然|没问题|收到|明白了?|(?:ok|okay|well|so|um+|uh+|oh|hmm+|actually|btw|by the way|anyway|yeah|yes"
    r"|right|hi|hello|hey|sure|great|cool|thanks|thank you|got it|no problem|of course|certainly|and|but|plus"
    r"|also)(?=[\s,，.。!！…]|$))[\s,，、.。!！~～…]*)+", _I)  # fmt: skip
_TRAIL_FILLER_RE = re.compile(r"(?:[\s,，、;；:：.。!！~～…]|[哈呵嘿嘻]{2,}|\blol\b|\bhaha\w*)+$", _I)
_SPACES_RE = re.compile(r"\s+")
# Where a summary may be cut: never at the "," of "1,000" or the ":" of "10:30" or a URL.
_SOFT_BREAK_RE = re.compile(r"[，；：、]\s*|[,;:](?=\s)\s*|\s+")
_ASCII_TOKEN_CHAR = re.compile(r"[A-Za-z0-9._\-#@$¥%]")


@dataclass(frozen=True)
class _Analysis:
    importance: float
    type: MemoryType
    reasons: tuple[str, ...]


def _spans(text: str, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Split ``text`` after each delimiter match; spans keep their delimiter, blanks are dropped."""
    out, start = [], 0
    for m in pattern.finditer(text):
        if m.end() > start:
            out.append((start, m.end()))
            start = m.end()
    out.append((start, len(text)))
    return [(s, e) for s, e in out if text[s:e].strip()]


def clause_spans(text: str) -> list[tuple[int, int]]:
    """Clauses: sentences split at commas, Chinese conjunctions and English "and I ..." joins."""
    cuts = {e for _, e in _spans(text, _CLAUSE_END_RE)}
    cuts |= {m.start() for m in _CONJ_ZH_RE.finditer(text) if m.start() > 0}
    last = 0
    for m in _CONJ_EN_RE.finditer(text):  # split only when the left part is itself a clause
        if len(_WORD_RE.findall(text[last : m.start()])) >= 3:
            cuts.add(m.start())
            last = m.start()
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(text)), len(text)]
    return [(s, e) for s, e in zip(bounds, bounds[1:], strict=False) if text[s:e].strip()]


def is_chit_chat(text: str) -> bool:
    """Acknowledgements, greetings, laughter and emoji only ("好的，谢谢", "lol ok", "哈哈哈")."""
    squeezed = _NON_WORD_RE.sub("", text.lower())
    return not squeezed or _ACK_RE.fullmatch(squeezed) is not None


def _is_question(clause: str) -> bool:
    return bool(_QUESTION_RE.search(clause.strip())) and not _REQUEST_RE.search(clause)


def statement_text(text: str) -> str:
    """``text`` without its question clauses: "我住杭州，你呢？" states only "我住杭州，"."""
    return "".join(text[s:e] for s, e in clause_spans(text) if not _is_question(text[s:e]))


def _entity_score(found: list[cues.Entity]) -> float:
    if not found:
        return 0.0
    weights = sorted(
        (_ENTITY_WEIGHTS.get(e.kind, 2.0 if e.kind != "acronym" else 1.5) for e in found), reverse=True
    )
    return min(4.5, weights[0] + 0.75 * (len(weights) - 1))


def _technical_score(text: str, has_entities: bool) -> float:
    """A technical topic (lexicon "fact" word) stated with a value: "部署端口是8443"."""
    if not any(h.type_hint is MemoryType.FACT for h in cues.lexicon_hits(text)):
        return 0.0
    if has_entities:
        return 3.0
    return 2.0 if _COPULA_RE.search(text) else 0.0


def _choose_type(typed: list[tuple[float, MemoryType]], text: str) -> MemoryType:
    """The type of the heaviest typed rule; else the first lexicon hint; else episodic."""
    if typed:
        return max(typed, key=lambda wt: (wt[0], -_TYPE_ORDER.index(wt[1])))[1]
    hints = [h.type_hint for h in cues.lexicon_hits(text) if h.type_hint is not None]
    return hints[0] if hints else _E


def analyse(text: str, role: Role = Role.USER) -> _Analysis:
    """Importance, memory type and the names of the rules that fired, for one piece of text."""
    if is_chit_chat(text):
        return _Analysis(0.5 if role is Role.USER else 0.0, _E, ("chit_chat",))
    statement = statement_text(text)
    if not statement.strip():  # a pure question asks for memory, it states none
        asked = _entity_score(cues.find_entities(text))
        return _Analysis(round(min(3.0, 0.5 + 0.5 * asked), 2), _E, ("question",))
    found = cues.find_entities(statement)
    user = role is Role.USER
    score = {Role.USER: 1.0, Role.ASSISTANT: 0.5}.get(role, 0.0)
    reasons: list[str] = [] if user else [f"role:{role.value}"]
    fired = [r for r in RULES if (user or not r.own_statement) and r.pattern.search(statement)]
    # Diminishing returns: the strongest rule counts fully, each further one half.
    weights = sorted((r.weight for r in fired), reverse=True)
    score += sum(w if i == 0 else w / 2 for i, w in enumerate(weights))
    reasons += [r.name for r in fired]
    if found:
        score += _entity_score(found)
        reasons.append(f"entities:{len(found)}")
    typed = [(r.weight, r.type) for r in fired if r.type is not None]
    technical = _technical_score(statement, bool(found))
    if technical:
        score += technical
        reasons.append("technical")
        typed.append((technical, _F))
    if any(h.type_hint is not None for h in cues.lexicon_hits(statement)):
        score += 0.5
        reasons.append("topic")
    if user and (len(_WORD_RE.findall(statement)) >= 12 or cues.CJK_RE.subn("", statement)[1] >= 20):
        score += 0.5
        reasons.append("substance")
    if role in (Role.SYSTEM, Role.TOOL) and not found:
        score = min(score, 3.0)
        reasons.append("no_entities")
    return _Analysis(round(max(0.0, min(10.0, score)), 2), _choose_type(typed, statement), tuple(reasons))


def clean(text: str) -> str:
    """Collapse whitespace and trim leading filler ("嗯，", "well,") and trailing punctuation."""
    text = _SPACES_RE.sub(" ", text).strip()
    trimmed = _TRAIL_FILLER_RE.sub("", _LEAD_FILLER_RE.sub("", text))
    return trimmed or text


def _cut(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a clause or word boundary, never inside a code."""
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    breaks = [m.start() for m in _SOFT_BREAK_RE.finditer(text, 0, room + 1) if m.start() >= room // 2]
    if breaks:
        return text[: breaks[-1]].rstrip() + ELLIPSIS
    cut = room
    while cut > 0 and _ASCII_TOKEN_CHAR.match(text[cut - 1]) and _ASCII_TOKEN_CHAR.match(text[cut]):
        cut -= 1  # step back to the start of the number or code that straddles the limit
    return (text[:cut].rstrip() or text[:room]) + ELLIPSIS


def _same(a: str, b: str) -> bool:
    return a.rstrip(_FULL_STOPS) == b.rstrip(_FULL_STOPS)


def summarize(text: str, role: Role = Role.USER, limit: int = MAX_SUMMARY_CHARS) -> str:
    """A short content line: the cleaned text, or its most informative sentences within ``limit``."""
    text = clean(statement_text(text) or text)
    if len(text) <= limit:
        return text
    # Sentences keep their own full stops so that the picked ones join back into prose.
    sentences = [_SPACES_RE.sub(" ", text[s:e]).strip() for s, e in _spans(text, _SENTENCE_END_RE)]
    scored = sorted(((analyse(s, role).importance, -i) for i, s in enumerate(sentences)), reverse=True)
    best_score, best_index = scored[0][0], -scored[0][1]
    picked: list[int] = []
    used = 0
    for score, neg_index in scored:
        length = len(sentences[-neg_index]) + 1
        repeated = any(_same(sentences[i], sentences[-neg_index]) for i in picked)
        if score >= best_score / 2 and used + length <= limit and not repeated:
            picked.append(-neg_index)
            used += length
    if not picked:
        return _cut(clean(sentences[best_index]), limit)
    joiner = "" if cues.CJK_RE.search(text) else " "
    return _cut(clean(joiner.join(sentences[i] for i in sorted(picked))), limit)


@dataclass(frozen=True)
class _Group:
    type: MemoryType
    start: int
    end: int


def _groups(text: str, role: Role, threshold: float) -> list[_Group]:
    """Runs of clauses about one kind of fact; a new group starts at a memorable clause of a new type.

    Clauses that are not memorable on their own stay with the group before them (or the first one).
    """
    groups: list[_Group] = []
    lead_start: int | None = None
    spans = clause_spans(text)
    if len(spans) > MAX_SPLIT_CLAUSES:  # a long text is summarised as a whole, not split up
        return groups
    for start, end in spans:
        found = analyse(text[start:end], role)
        if found.importance >= threshold and (not groups or groups[-1].type != found.type):
            groups.append(_Group(found.type, start if lead_start is None else lead_start, end))
            lead_start = None
        elif groups:
            groups[-1] = _Group(groups[-1].type, groups[-1].start, end)
        elif lead_start is None:
            lead_start = start
    return groups


def _draft(text: str, role: Role, importance: float, type_: MemoryType) -> MemoryDraft:
    content = summarize(text, role)
    tags = cues.lexicon_tags(content)
    found = cues.entities(content)[:MAX_DRAFT_ENTITIES]
    return MemoryDraft(
        type=type_,
        content=content,
        importance=importance,
        tags=tags,
        entities=found,
        cues=cues.cues_for_memory(content, tags, found),
    )


def extract(event: TurnPublished, threshold: float = DEFAULT_THRESHOLD) -> Extraction:
    """Score one turn and, when it reaches ``threshold``, turn it into memory drafts."""
    text = event.content
    turn = analyse(text, event.role)
    groups = [] if turn.importance < threshold else _groups(text, event.role, threshold)
    if len(groups) >= 2:
        parts = [(text[g.start : g.end], analyse(text[g.start : g.end], event.role)) for g in groups]
        importance = max(turn.importance, *(a.importance for _, a in parts))
        drafts = tuple(
            _draft(part, event.role, a.importance, g.type) for (part, a), g in zip(parts, groups, strict=True)
        )
        return Extraction(importance, drafts, turn.reasons + ("split:" + str(len(drafts)),))
    if turn.importance < threshold:
        return Extraction(turn.importance, (), turn.reasons)
    return Extraction(turn.importance, (_draft(text, event.role, turn.importance, turn.type),), turn.reasons)
