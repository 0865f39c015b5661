"""The rules behind :mod:`shared.ingest.extraction`: what makes a turn important and of which type.

Data, not logic: each :class:`Rule` is a named regex with a weight and a memory type. Also the
polarity and change helpers that conflict detection shares (:func:`is_negated`, :func:`is_change`)
and the question patterns that keep a user's recurring interests ("收盘了吗", "我那只基金怎么样").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.language import cues
from shared.language.plan_words import PLAN_RE
from shared.models import MemoryType

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
    r"|researcher|professor|scientist|writer|artist|chef|consultant|analyst|founder|freelancer|architect"
    r"|data scientist)"
)
_HABIT_EN = r"(?:drink|eat|use|prefer|like|work|live|take|go|run|write|code|play|listen|watch|read)\b"
_HABIT_ZH = r"(?:吃|喝|用|抽|玩|碰|买|点|看|写|练|学|打)"
# A habit or routine ("我每天早上都喝美式", "每周三晚上去游泳", "I walk the dog every evening",
# "I usually take the bus"): a preference worth keeping. The routine word, then at most a time of
# day and a clock time, then what is done: "每天早上8点提醒我吃药" stays a task.
_ROUTINE_ZH = _alt(
    "每天 每日 天天 每晚 每早 每周[一二三四五六日天]? 每个?星期[一二三四五六日天]?"
    " 每个?礼拜[一二三四五六日天]? 每个?周末 每个?月 平时 平常 一般 通常 经常 常常 总是 老是 向来 一向 一直"
)
_ROUTINE_WHEN_ZH = (
    r"(?:早上|早晨|清晨|上午|中午|下午|傍晚|晚上|夜里|睡前|饭后|早饭|午饭|晚饭|起床后|下班后|放学后)?"
    r"(?:(?:\d{1,2}|[一二三四五六七八九十]{1,3})点(?:半|钟)?)?(?:左右)?(?:都|会|要|也|还|就)*"
)
_ROUTINE_DO_ZH = _alt(
    "吃 喝 用 抽 玩 碰 买 点 看 写 练 学 打 去 跑 游 走 遛 骑 做 听 读 睡 起"
    " 健身 散步 锻炼 冥想 泡 刷 背 弹 唱 坐 开车"
)
_NOT_ASKED_ZH = r"(?![^，,。！!？?]*(?:什么|哪|几点|多少|多久|谁|怎么|吗|呢))"  # "我每周做什么运动"
_ROUTINE_EN = r"(?:morning|day|evening|night|week|weekend|month|(?:mon|tues|wednes|thurs|fri|satur|sun)day)s?"
# What is done, in the present: not a past ("went", "walked") nor "have" (a recurring meeting is a
# task's business).
_ROUTINE_VERB_EN = r"(?!(?:was|were|went|had|did|used|got|ran|ate|drank|came|took|have|has)\b|\w+ed\b)\w+"
_JOBS_ZH = _alt(
    "工程师 程序员 医生 护士 老师 教师 律师 会计 设计师 经理 学生 研究生 博士"
    " 销售 司机 厨师 作家 记者 主管 总监 分析师 架构师 研究员 公务员 顾问 运营 编辑"
    " 翻译 警察 演员 主播 咨询师"
)
_FAMILY_ZH = _alt(
    "老婆 老公 妻子 丈夫 爱人 女儿 儿子 孩子 妈妈 爸爸 父母 母亲 父亲 哥哥 姐姐 弟弟 妹妹 男朋友 女朋友 对象"
)
_FAMILY_EN = (
    r"(?:wife|husband|partner|son|daughter|kids?|children|mom|mum|mother|dad|father|parents|brother"
    r"|sister|boyfriend|girlfriend|fianc[ée]e?|dog|cat)"
)


@dataclass(frozen=True)
class Rule:
    """A named pattern: its weight adds to importance, its type (if any) competes for the memory's."""

    name: str
    weight: float
    type: MemoryType | None
    pattern: re.Pattern[str]
    own_statement: bool  # the speaker about themself: only a user's turn says this about the user
    needs_time: bool = False  # fires only when the text also names a time (shared.language.timeexpr)


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
    _ZS + r"(?:也|还|都|从来|一直)?(?:不|从不|不太|不怎么|很少|不爱|没法)(?:吃|喝|喜欢|爱|用|碰|抽)"
    r"(?!了?(?:[，,。.！!~～]|\s*$))",  # "不用了，谢谢" declines an offer
    r"讨厌|受不了|忌口|过敏|吃素|素食|不能吃|不能喝|乳糖不耐|最爱",
    _ZS
    + _NOT_ASKED_ZH
    + r"(?:也|还)?(?:周末|早上|晚上)?"
    + _ROUTINE_ZH
    + r"+"
    + _ROUTINE_WHEN_ZH
    + _ROUTINE_DO_ZH,
    r"\bI (?:really |absolutely |just |do |also |still |totally |kind of )*(?:prefer|like|love|enjoy|hate"
    r"|dislike|adore|loathe|can't stand|cannot stand|can't eat|avoid|(?:don't|do not|never) (?:like|eat|"
    r"drink|want|use)|(?:always|usually|often|normally) (?:eat|drink|use|take|order|get|wear))\b",
    rf"\b(?:I|we) {_ROUTINE_VERB_EN}(?: \w+){{0,5}} (?:every|each) (?:single )?(?:other )?{_ROUTINE_EN}\b",
    rf"\b(?:every|each) {_ROUTINE_EN},? (?:I|we) {_ROUTINE_VERB_EN}",
    rf"\b(?:I|we) (?:always|usually|normally|generally|typically|regularly|often|tend to) {_ROUTINE_VERB_EN}",
    r"\bmy fav(?:ou)?rite\b|\b(?:allergic|allergy|vegetarian|vegan|lactose|gluten)\b",
    r"\bI'm a (?:huge |big )?fan of\b",
)
# A new job or home is a change only when it is the speaker's own and obtained ("my new job", "I am
# loving the new job", "我换了新工作"): not when the clause before it congratulates someone else,
# seeks or wishes for one, or sets a condition ("congrats on the new job", "on the hunt for a new
# job", "if I get a new job", "恭喜你换了新工作", "我在找新工作", "想换工作").
_NOT_OWN_EN = (
    r"congrat\w*|luck|proud|you|your|you're|he|she|they|his|her|their|look\w*|hunt\w*|search\w*"
    r"|seek\w*|want\w*|wish\w*|hop(?:e|es|ing)|need\w*|apply\w*|applied|interview\w*|find|finding"
    r"|if|unless|whether"
)
_NOT_OWN_ZH = r"找|寻|想|希望|盼|如果|要是|假如|万一|恭喜|祝贺|你|他|她"


def _own_en(what: str) -> str:
    """``what`` with no word of :data:`_NOT_OWN_EN` before it in its clause."""
    return rf"(?:^|(?<=[.!?,;:]))(?:(?!\b(?:{_NOT_OWN_EN})\b)[^.!?,;:\n])*?{what}"


def _own_zh(what: str) -> str:
    return rf"(?:^|(?<=[，,。.!！?？;；:：]))(?:(?!{_NOT_OWN_ZH})[^，,。.!！?？;；:：\n])*?(?:{what})"


_PROFILE = _any(
    r"我叫|我的名字|我(?:今年)?\d{1,3}岁|我今年|我的生日|我住|住在|家住|我家在|我(?:的)?老家|我来自|搬到|毕业于",
    r"我在(?!找|寻|考虑|想)[^，,。]{1,15}(?:工作|上班|实习|读书|上学|任职)|我(?:的)?(?:工作|职业)是",
    _ZS + r"(?:在[^，,。]{1,20})?(?:做|当|担任)(?:一名|一个|个|了)?[^，,。]{0,8}?" + _JOBS_ZH,
    r"我的?(?:主要|主力|首选)(?:编程|开发)?语言|我的?母语|我(?:主要|平时主要|日常)(?:用|写|说)",
    r"\bmy (?:primary|main|native|first|preferred|go-to|daily|default|usual)"
    r" (?:programming |coding |spoken )?(?:language|tongue|stack|editor|ide|os|shell)\b",
    r"\bI (?:mainly|mostly|primarily) (?:use|code in|write|work (?:in|with)|program in|speak)\b",
    r"我(?:是|当)(?:一名|一个|个)?[^，,。]{0,6}" + _JOBS_ZH,
    r"\bmy name is\b|\bI'm called\b|\bcall me\b|\bI(?:'m| am) \d{1,3}(?: years old)?\b|\bmy birthday\b",
    # An adverb between "I" and the verb ("I now live in", "I currently work at") says the same.
    r"\bI (?:now |currently |still |actually )?(?:live|lived|grew up|was born|moved|relocated)"
    r" (?:in|to|at)\b",
    r"\bI(?:'m| am) (?:from|based in)\b",
    r"\bmy (?:hometown|home town|address)\b|\bI (?:speak|studied|graduated|majored)\b",
    r"\bI(?:'m| am)? (?:now |currently |still )?(?:work|worked|working) (?:as|at|for|in|on)\b"
    r"(?! (?:it|that|this|them)\b)",
    r"\bmy (?:job|role|title|employer)\b",
    rf"\bI(?:'m| am) an? (?:\w+ )?{_JOBS}\b",
    # A trade named by its form ("a pharmacist in Leeds", "a vet at", "an electrician for"): a noun of
    # a trade's suffix, or any noun followed by where it is done. What the job is, is left to the
    # slot's meaning (``shared.ingest.slot_meaning``), so no list of trades has to be complete.
    r"\bI(?:'m| am) (?:now )?an? (?:\w+ )?\w+(?:ist|ian|ner|ker|ter|ger|ver|ser|tor|sor)\b"
    r"(?= (?:in|at|for|with)\b)",
    r"\bI(?:'m| am) (?:now )?an? \w+(?: \w+)? (?:at|for) (?:an? |the )?(?-i:[A-Z])\w*",  # a name
    r"\bI(?:'m| am) (?:now )?an? \w+(?: \w+)? (?:at|for) (?:an?|the|my) \w+",  # "a barista at a café"
    # Changes of home, job, number and partner, stated without the words of the first statement
    # ("跳槽到腾讯了" after "我在阿里上班"): profile facts, so that their slot can replace the old one.
    _own_zh(r"搬家|搬去|搬回|跳槽|入职|离职|辞职|换了?新?(?:工作|公司)|新工作")
    + r"|加入了?[^，,。]{1,12}(?:公司|团队|集团)",
    # A role by its classifier ("我现在是一名兽医"), a new workplace or home in other words ("换到了一家
    # 律所", "新单位在南山", "在深圳安家了"): which slot, the meaning says (``slot_meaning``).
    r"我(?:现在|目前|已经|也)?是一[名位]|安家|落户|领证|"
    + _own_zh(r"(?:换|转|调|跳)到了?一家|新(?:公司|单位|东家|住处|房子)"),
    r"我的?(?:新)?(?:手机号码?|电话号码)|换了?(?:手机号码?|电话号码|号码|号)|新号码",
    r"分手|离婚|结婚了|订婚|单身|脱单|在谈恋爱|(?:交|谈)了(?:一?个)?(?:男|女)朋友",
    r"\bI (?:left|quit)\b[^.!?]{1,40}\bnow (?:I(?:'m| am) )?(?:at|with|working (?:at|for))\b",
    r"\bI(?:'m| am) now (?:at|with|working (?:at|for))\b",
    r"\b(?:left|quit) my job\b",
    _own_en(
        r"\b(?:(?:my|our) new (?:job|employer|workplace|position|role|place|apartment|house|home|office)"
        r"|(?:the|this|a) new (?:job|employer|workplace|position|role))\b"
    ),
    _own_en(r"\bfirst (?:day|week|month|shift) (?:at|in|of) (?:the|my|our) new \w+"),
    r"\bI(?:'ve| have)? (?:just |finally |recently )?(?:started|got|landed|found|accepted|began) (?:a|my) new"
    r" (?:job|position|role)\b|\bI(?:'ve| have)? started (?:working )?at\b|\bI got hired (?:at|by)\b",
    r"\bmy (?:new |current )?(?:phone|cell|mobile) number\b|\bmy new number\b",
    r"\b(?:I|we) (?:broke up|split up|got married|got engaged|got divorced)\b",
    r"\bI(?:'m| am) (?:now )?(?:single|married|engaged|divorced|dating)\b",
)
# A move or a new employer still to come, to a place or an employer named ("I'm going to move to
# Suzhou next spring", "we're moving to Denver", "I will start at Google in May"): the slot it
# fills once it happens. It only ever gives a plan (``shared.ingest.plans.coming_plan``); a move
# that has not happened is never the present home. Nothing but a time, an end or "with my
# family" may follow the name:
# "moving to Slack for team chat", "start at Costco to buy groceries" and "start at Central Park
# and run" name no home or employer.
_NAME = r"(?-i:[A-Z][\w'&.-]*)(?: (?-i:[A-Z][\w'&.-]*))*"
_AFTER = (
    r"(?=\s*(?:$|[.,!;:?]|(?:in|on|next|this|soon|after|before|by|early|late|later|around|once|when)\b"
    r"|with (?:my|our)\b))"
)
COMING_SLOTS = (
    (
        "profile:home",
        re.compile(
            r"\b(?:I|we)(?:['’]m|['’]re| am| are|['’]ll| will)? (?:\w+ )?"
            r"(?:going to |planning to |plan to |about to |gonna )?(?:be )?"
            rf"(?:move|moving|relocate|relocating) (?:back )?to (?P<name>{_NAME}){_AFTER}",
            _I,
        ),
    ),
    (
        "profile:job",
        re.compile(
            r"\bI(?:['’]m| am|['’]ll| will)? (?:\w+ )?(?:going to |about to |gonna )?(?:be )?"
            r"(?:start|starting) (?:work |working |my new job |a new job |the new job )?"
            rf"at (?P<name>{_NAME}){_AFTER}",
            _I,
        ),
    ),
)
_COMING = re.compile("|".join(f"(?:{p.pattern.replace('(?P<name>', '(')})" for _, p in COMING_SLOTS), _I)
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
# An instruction to remember ("记住，", "请记住。", "Please remember this:", "keep in mind that"):
# it raises the importance of the statement it is attached to (the "remember" rule) and is never a
# memory of its own. A clause that is only the instruction, and an English "remember that ..."
# lead-in, are cut from the memory's words (:func:`without_instruction`); "remember to call mom"
# is a task, not an instruction, and stays.
_INSTRUCTION_ZH = (
    r"(?:请|麻烦|你|帮我|给我)*(?:一定|务必|千万)?要?(?:好好)?"
    r"(?:记住|记一下|记好|记着|记下来?|帮我记(?:住|下|一下|着)?)"
    r"(?:了|哦|喔|噢|啊|呀|哈|吧|啦|喽)?(?:这(?:个|件事|一点|点)?)?"
)
_INSTRUCTION_EN = (
    r"(?:(?:please|pls|and|also|just)[\s,]+)*(?:do\s+)?(?:remember|keep\s+in\s+mind|make\s+a\s+note(?:\s+of)?"
    r"|take\s+note(?:\s+of)?|note)(?:\s+(?:this|that|it))?(?:\s+for\s+(?:future\s+)?reference)?(?:[\s,]+please)?"
)
_INSTRUCTION_CLAUSE = re.compile(
    rf"(?:^|(?<=[,，。.!！?？;；:：\n]))\s*(?:{_INSTRUCTION_ZH}|{_INSTRUCTION_EN})\s*(?:[,，。.!！;；:：~～]+|$)",
    _I,
)
_INSTRUCTION_LEAD = re.compile(
    r"^\s*(?:(?:please|pls|and|also|just)[\s,]+)*(?:do\s+)?(?:remember|keep\s+in\s+mind|note)\s+that\s+"
    r"|^\s*(?:请|帮我)?(?:一定|务必)?要?记住(?=我|你)",
    _I,
)


def without_instruction(text: str) -> str:
    """``text`` without its instructions to remember: "记住，我不吃香菜！" → "我不吃香菜！",
    "Please remember this: my passport expires…" → "my passport expires…"; "" when the text is
    nothing but one ("请记住。")."""
    return _INSTRUCTION_LEAD.sub("", _INSTRUCTION_CLAUSE.sub("", text)).strip()


def is_instruction(text: str) -> bool:
    """Whether ``text`` is only an instruction to remember ("记住，", "请记住。", "Remember this!")."""
    return bool(text.strip()) and not without_instruction(text).strip(" \t\n,，。.!！?？;；:：~～")


# A change of preference or habit ("我现在改喝拿铁了", "I no longer eat meat"): the draft is marked
# as a change so that conflict detection lets it replace what it changes.
CHANGE = _any(
    r"改(?:喝|吃|抽|骑|坐|住|学|穿|听|玩|看|成|为)|换成|换用|不再|(?<!们)我(?:现在|已经|最近)?改用",
    r"现在(?:开始|起|改|只)|现在都" + _HABIT_ZH + r"|从(?:现在|今天)(?:开始|起)|戒(?:掉|了|烟|酒|糖)",
    _ZS + r"(?:已经|现在|早就|都)?(?:不再?|没再|不怎么)" + _HABIT_ZH + r"[^，,。！!？?了]{1,10}了",
    r"\bno longer\b|\bI(?:'ve| have)? (?:switched|changed|moved over|converted)\b",
    r"\bswitched (?:to|from|over)\b",
    r"\b(?:now|these days|nowadays),? I (?:only |mostly |usually |mainly |always )?" + _HABIT_EN,
    r"\bI now (?:only |mostly |usually |mainly |always )?" + _HABIT_EN,
    r"\bI(?:'ve| have)? (?:stopped|quit|given up|gave up)\b|\binstead\b",
    r"(?:\b(?:not|no|never)\b|n't\b)[^.!?]{3,40}\bany ?more\b",
)
# Rescheduling ("会议改到后天", "推迟到周五", "the meeting moved to Friday"): a change to a task.
RESCHEDULE = re.compile(
    r"(?:改到|改在|推迟到|推迟了|延期到|延后到|提前到|挪到)"
    r"|\b(?:rescheduled|postponed|pushed back|moved (?:up )?to|brought forward)\b",
    re.IGNORECASE,
)
# Ongoing activities of the speaker ("最近在写 Java 项目", "I'm learning the cello").
_ACTIVITY = _any(
    r"(?:最近|这段时间|这阵子|这几天|目前|现在|这学期|今年)(?:一直|都|正|也)?在(?:学|写|做|练|读|准备|研究|开发|搞|忙|带|备考|考|看)",
    r"我(?:正|一直|也|还)?在(?:学(?!校|院|生)|练|写|读(?!者)|准备|研究|开发|搞|备考)",
    r"\bI(?:'m| am) (?:currently |now |still |also )?(?:learning(?! (?:a lot|so much|that)\b)|studying"
    r"|building|writing|developing|training for|preparing for|working on(?! (?:it|that|this)\b)|practi[cs]ing"
    r"|teaching myself|taking (?:a |an )?(?:class|course|lessons))\b",
    r"\bI(?:'ve| have) been (?:learning|studying|building|writing|working on|developing|practi[cs]ing"
    r"|training|playing|using|coding|reading)\b",
    r"\bI(?:'m| am) (?:currently|now) (?:using|reading|working)\b",
)
# Weights: a stated preference, profile fact or task alone lifts a user turn (base 1) past 5.
RULES: tuple[Rule, ...] = (
    Rule("prohibition", 5.5, _P, _PROHIBITION, False),
    Rule("preference", 5.0, _P, _PREFERENCE, True),
    Rule("profile", 5.0, _PR, _PROFILE, True),
    Rule("task", 5.0, _T, _TASK, True),
    Rule("promise", 5.0, _T, _PROMISE, False),
    # A plan with a time ("三月份要去日本出差", "I'm going to visit Rome in May") is a task: analyse()
    # adds it when the plan words match and the statement names a time (shared.language.timeexpr).
    Rule("plan", 4.5, _T, PLAN_RE, True, needs_time=True),  # only when no task rule fired
    Rule("reschedule", 5.0, _T, RESCHEDULE, False),
    Rule("change", 5.0, None, CHANGE, True),  # typed in analyse(): what changed, else a preference
    # A move or a start to come: a plan of the slot when its mood is a plan (``plans.coming_plan``),
    # else an episode, never the present value.
    Rule("coming", 5.0, _E, _COMING, True),
    Rule("activity", 4.5, _PR, _ACTIVITY, True),
    Rule("family", 4.0, _PR, _FAMILY, True),
    Rule("decision", 4.5, _F, _DECISION, False),
    Rule("remember", 4.0, _F, _REMEMBER, False),
    Rule("experience", 3.0, _E, _EXPERIENCE, True),
    Rule("issue", 2.0, None, _ISSUE, False),
    Rule("ownership", 1.5, None, _OWNERSHIP, True),
)
# Type precedence when two typed rules have the same weight.
TYPE_ORDER = (_P, _PR, _T, _F, _E)
ENTITY_WEIGHTS = {"id": 3.0, "email": 3.0, "url": 3.0, "money": 2.5, "date": 2.5, "code": 2.5}
COPULA_RE = re.compile(r"是|为|改成|改为|设为|设置|用的|=|:|：|\b(?:is|are|set to|uses?|runs? on)\b", _I)

# Weight of a change's own type claim: below the 5.0 rules (what changed keeps its type), above a
# decision (4.5) or an experience (3.0): "I switched to decaf" is a preference, not a decision.
CHANGE_TYPE_WEIGHT = 4.9

_NEGATION = _any(
    r"(?<!差)不(?!错|过|少|同|然|久|仅|管|如|但|论|断|好意思|客气|用谢|一定|要忘|会忘)",
    r"没(?!事|关系|问题|错)|别(?!人|的|处|墅|名|说|忘)|莫|勿|甭|未(?!来)|无法|戒(?:掉|了|烟|酒|糖)|拒绝",
    r"\b(?:not|never|none|nothing|neither|nor|cannot|no longer)\b(?! (?:bad|only|just))",
    r"\bno\b(?! (?:problem|worries|doubt|way))|n't\b(?! forget)|\b(?:stop|stopped|quit)\b",
)
# A question about the speaker's own things ("我那只基金怎么样", "how did my stocks do today") ...
POSSESSIVE_RE = re.compile(
    r"我的|我那(?:只|个|支|些|几只|套|辆|台|笔|份|张|家|款)|我家的?|我们的|\b(?:my|our|mine)\b", _I
)
# ... unless it asks memory to recall a stored fact ("what is my phone number", "我叫什么").
RECALL_RE = re.compile(
    r"是什么|叫什么|是多少|是谁|是几|哪一?个|记得|知道|\b(?:what|which|who|remember|recall|know)\b", _I
)


def is_negated(text: str) -> bool:
    """Whether ``text`` states a negation: 不/没/别/戒, not/never/don't/no longer ("我不用 Java")."""
    return _NEGATION.search(text) is not None


def is_change(text: str) -> bool:
    """Whether ``text`` states a change: 改喝/换成/不再/不…了/现在开始, switched to/no longer/anymore."""
    return CHANGE.search(text) is not None or RESCHEDULE.search(text) is not None


def interest_topic(question: str) -> str | None:
    """Why a question is worth keeping: a followed lexicon topic ("finance") or "own" (the speaker's
    own things, not a recall question); None for everything else ("你好吗", "how are you")."""
    topic = cues.interest_tag(cues.lexicon_tags(question))
    if topic is not None:
        return topic
    if POSSESSIVE_RE.search(question) and not RECALL_RE.search(question):
        return "own"
    return None
