"""Naming links: a statement that ties one of the user's people or pets to a name ("我儿子叫乐乐",
"My son's name is Leo", "Leo, my son, ..."), so that a question about one ("我儿子喜欢什么运动？")
can reach memories that only name the other ("乐乐每周六去踢足球").

Extraction stores both sides of each link as cue keys ``l:<side>`` (``shared.language.cues.cues_for_memory``:
an array element like any cue, so no schema change); recall's second cue hop
(``shared.recall.deterministic.link_hop``) finds the memories holding a query word as a link side,
reads their links back with the same function and looks the other side up. The patterns are
deliberately narrow (a list of roles, a name of 2-4 Chinese characters or one capitalised word):
a wrong link sends the hop to unrelated memories. ``shared.language.cues.links`` drops the names that are
lexicon or common words ("我妈妈是老师", "Thanks, my friend").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.language.clauses import clause_spans

LINK_PREFIX = "l:"
MAX_LINKS_PER_TEXT = 4

_ROLES_ZH = """
    儿子 大儿子 小儿子 女儿 大女儿 小女儿 孩子 宝宝 老婆 老公 妻子 丈夫 爱人 太太 媳妇 妈妈 爸爸 母亲 父亲
    哥哥 姐姐 弟弟 妹妹 男朋友 女朋友 对象 未婚夫 未婚妻 爷爷 奶奶 外公 外婆 姥姥 姥爷 朋友 好朋友 闺蜜
    室友 同事 同学 老板 领导 上司 导师 邻居 猫 狗 猫咪 狗狗 小猫 小狗 宠物
    妈 爸 姐 哥 弟 妹 老妈 老爸 爸妈 父母 叔叔 阿姨 舅舅 姑姑 表哥 表姐 表弟 表妹
    岳父 岳母 公公 婆婆 嫂子 姐夫 妹夫 弟媳 舅妈 婶婶 伯伯 伯父 姑父 姨妈 侄子 侄女 外甥 外甥女 孙子 孙女
    外孙 外孙女 堂哥 堂姐 堂弟 堂妹 孩子们 家人 亲戚
"""
# Underscores join two-word roles.
_ROLES_EN = """
    son daughter kid child baby wife husband partner spouse boyfriend girlfriend fiance fiancee fiancé
    fiancée mom mum mother dad father brother sister grandma grandpa grandmother grandfather friend
    best_friend roommate colleague coworker boss manager neighbor neighbour dog cat puppy kitten pet
    aunt uncle cousin niece nephew grandson granddaughter stepmom stepdad stepmother stepfather
    sons daughters kids children parents brothers sisters siblings grandparents grandkids
    grandchildren friends best_friends roommates colleagues coworkers neighbors neighbours dogs cats
    pets aunts uncles cousins nieces nephews in-laws family folks
"""


def _alternation(words: str) -> str:
    """A regex group of the words, longest first: "男朋友" is not read as "朋友", nor "best friend"
    as "friend"."""
    alternatives = sorted({w.replace("_", " ") for w in words.split()}, key=lambda w: (-len(w), w))
    return "(" + "|".join(re.escape(w) for w in alternatives) + ")"


_ROLE_ZH = _alternation(_ROLES_ZH)
_ROLE_EN = _alternation(_ROLES_EN)
# The user's partner: "my boyfriend is Tom" is about the user's own relationship.
_PARTNERS = frozenset(
    [
        "老婆",
        "老公",
        "妻子",
        "丈夫",
        "爱人",
        "太太",
        "媳妇",
        "男朋友",
        "女朋友",
        "对象",
        "未婚夫",
        "未婚妻",
        "wife",
        "husband",
        "partner",
        "spouse",
        "boyfriend",
        "girlfriend",
        "fiance",
        "fiancee",
        "fiancé",
        "fiancée",
    ]
)
_THEIR_ZH = re.compile(r"我(?:的|家)?" + _ROLE_ZH)
_THEIR_EN = re.compile(r"(?<![A-Za-z])(?i:my|our) (?i:" + _ROLE_EN + r")\b")
_I_EN = re.compile(r"(?<![A-Za-z])I(?:'m|'ve|'d|'ll)?(?![A-Za-z])")
# A clause of the user's household after one about someone else ("…, we have a daughter").
_WE_EN = re.compile(r"(?<![A-Za-z])(?i:we|we're|we've|us|our)(?![A-Za-z])")


def about_someone_else(text: str, partner_is_self: bool = False) -> bool:
    """The text tells of someone the user knows, not of the user: "我同事跳槽去了腾讯", "My
    brother changed his phone number" name a role of theirs and no statement of the user's own
    ("I moved here with my sister" is the user's). With ``partner_is_self`` the user's partner
    counts as the user ("my boyfriend is Tom" is the user's relationship)."""
    roles = [m.group(1) for m in _THEIR_ZH.finditer(text)] + [
        m.group(1).lower() for m in _THEIR_EN.finditer(text)
    ]
    if not [r for r in roles if not (partner_is_self and r in _PARTNERS)]:
        return False
    rest = _THEIR_EN.sub(" ", _THEIR_ZH.sub(" ", text))
    return "我" not in rest and not _I_EN.search(rest)


def own_text(text: str, partner_is_self: bool = False) -> str:
    """The clauses of ``text`` that speak of the user: "" when the whole text is about someone
    else (:func:`about_someone_else`). A clause about someone else is left out, and so is each
    clause after it with no subject of its own, until one names the user again:
    "我老婆是小学老师，我们有一个女儿" keeps "我们有一个女儿" (the teacher is the wife, so the
    user's job must not be read from it), "My wife is a nurse, works nights, and I teach" keeps
    "and I teach"."""
    if about_someone_else(text, partner_is_self):
        return ""
    kept: list[str] = []
    theirs = False
    for start, end in clause_spans(text):
        clause = text[start:end]
        if about_someone_else(clause, partner_is_self):
            theirs = True
        elif _names_the_user(clause):
            theirs = False
        if not theirs:
            kept.append(clause)
    mine = "".join(kept)
    return text if mine == text else mine.strip()


def _names_the_user(clause: str) -> bool:
    # A role left here is a partner who counts as the user: other roles made the clause theirs.
    return "我" in clause or bool(_I_EN.search(clause) or _THEIR_EN.search(clause) or _WE_EN.search(clause))


# A Chinese name ends where the sentence goes on ("乐乐今年五岁", "小明，...", "乐乐每周六...").
_NAME_END_ZH = (
    r"(?=$|[\s，,。.!！?？;；:：、~～)）]|今年|已经|现在|刚|才|了|的|在|也|和|跟|是|每|很|都|从|去|上|读|"
    r"特别|非常|最|喜欢|爱)"
)
_NAME_ZH = r"([A-Za-z][A-Za-z'-]{1,20}|[\u4e00-\u9fff]{2,4}?)" + _NAME_END_ZH
_SENTENCE_START_ZH = r"(?:^|(?<=[\s，,。.!！?？;；:：、]))"
# "我儿子叫乐乐", "我的女儿名叫小雨", "我家的狗叫旺财", "我养的猫叫咪咪", "我养了一只猫，叫团子",
# "我老板是王总".
_ROLE_NAMED_ZH = re.compile(
    r"我(?:家|们家)?(?:[\u4e00-\u9fff]{0,2}的|(?:有|养了?)[一两三]?[只个条位]?)?"
    + _ROLE_ZH
    + r"(?:的名字|名字)?[，,]?(叫做|名叫|叫|是)"
    + _NAME_ZH
)
# "乐乐是我儿子", "小雨是我的女儿".
_NAME_IS_ROLE_ZH = re.compile(
    _SENTENCE_START_ZH + r"([A-Za-z][A-Za-z'-]{1,20}|[\u4e00-\u9fff]{2,4})是我(?:的|家)?" + _ROLE_ZH
)
# Not names: pronouns, question words, measure words ("我儿子叫什么", "我老婆是一名医生").
_NOT_NAME_START_ZH = tuple("一个位名我你他她它这那谁什哪几多怎")

_NAME_EN = r"([A-Z][a-z]+(?:-[A-Z][a-z]+)?)(?![A-Za-z'’])"
# "My son's name is Leo", "my son is called Leo", "a son named Leo", "my son Leo", "my son, Leo,".
_ROLE_NAMED_EN = re.compile(
    r"(?<![A-Za-z])(?i:my|our|a|an) (?i:" + _ROLE_EN + r")"
    r"(?:['’]s name is| is named| is called| named| called| is|,)? " + _NAME_EN
)
# "Leo, my son, ...", "Leo is my son".
_NAME_IS_ROLE_EN = re.compile(
    r"(?<![A-Za-z])" + _NAME_EN + r",? (?:is )?(?i:my|our) (?i:" + _ROLE_EN + r")\b"
)


@dataclass(frozen=True)
class Link:
    """One of the user's people or pets (``role``, "儿子", "son") and its name ("乐乐", "leo"),
    both normalised as cue values are (lower case)."""

    role: str
    name: str

    def cue_keys(self) -> tuple[str, str]:
        """The cue keys a memory stating this link holds: one per side."""
        return f"{LINK_PREFIX}{self.role}", f"{LINK_PREFIX}{self.name}"


def _chinese_name(name: str, verb: str) -> bool:
    if name.startswith(_NOT_NAME_START_ZH):
        return False
    # "我老婆是上海人", "我儿子是学生的时候": a description, not a name.
    return not (verb == "是" and name.endswith(("人", "的", "家", "生")))


def find_links(text: str) -> tuple[Link, ...]:
    """The naming links ``text`` states, in order, each once (at most ``MAX_LINKS_PER_TEXT``)."""
    found: list[tuple[int, Link]] = []
    for m in _ROLE_NAMED_ZH.finditer(text):
        if _chinese_name(m.group(3), m.group(2)):
            found.append((m.start(), Link(m.group(1), m.group(3).lower())))
    for m in _NAME_IS_ROLE_ZH.finditer(text):
        if _chinese_name(m.group(1), "是"):
            found.append((m.start(), Link(m.group(2), m.group(1).lower())))
    for m in _ROLE_NAMED_EN.finditer(text):
        found.append((m.start(), Link(m.group(1).lower(), m.group(2).lower())))
    for m in _NAME_IS_ROLE_EN.finditer(text):
        found.append((m.start(), Link(m.group(2).lower(), m.group(1).lower())))
    found.sort(key=lambda item: item[0])
    return tuple(dict.fromkeys(link for _, link in found))[:MAX_LINKS_PER_TEXT]
