"""Chinese typography and terminology, checked on every string a Chinese learner reads
(catalogs and lesson sections, after the line-joining step), per docs/GLOSSARY.md: full-width
punctuation, no space around it, 「……」, no Markdown italics on Chinese, lists with 「、」,
and one term per concept (the variant spellings the Chinese review found fail here)."""

from __future__ import annotations

import re

import pytest

from course import i18n
from tests.test_i18n import catalog_files, lesson_files, load_catalog

CJK = "\u3400-\u9fff"
_MATH_OR_CODE = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|`+[^`]*`+|\{[a-z_0-9]+(:[^}]*)?\}", re.S)

# Problems that read the same in both scripts: (pattern, what is wrong)
COMMON = [
    (re.compile(rf"[ \t]+[（「『《〈]|[（「『《〈][ \t]+"), "space before or inside a full-width bracket"),
    (re.compile(rf"[。，、；：！？）」][ \t]+(?=\S)"), "space after full-width punctuation"),
    (re.compile(r"(?<![… ])…(?![…])|(?<!…)…(?![… ])"), "a single 「…」 (the Chinese ellipsis is 「……」; a spaced one, as in 「A B … A」, is a sequence)"),
    (re.compile(rf"(?<![*A-Za-z0-9\\])\*(?![\s*])[^*\n]*[{CJK}][^*\n]*(?<![\s*\\])\*(?![*A-Za-z0-9])"), "Markdown italics on Chinese"),
    (re.compile(rf"[{CJK}][ \t]?\([^)\n]*\)|(?<![A-Za-z0-9_])\([^)\n]*\)[ \t]?[{CJK}]"), "ASCII parentheses in Chinese text"),
    (re.compile(rf"[{CJK}]\s*[,;]\s*[\d{CJK}]|\d, \d+\s?[{CJK}]"), "ASCII comma or semicolon in Chinese text"),
    (re.compile("－"), "full-width hyphen-minus 「－」"),
    (re.compile(r"\bcpu\b"), "lowercase cpu"),
    (re.compile(r"\bnats?\b(?!）)"), "untranslated unit nat (奈特)"),
    (re.compile(r"\d\s*M\s*[個个]|百萬[次個]|百万[次个]"), "big numbers not written the Chinese way (億/亿, 萬/万)"),
    (re.compile(r"相差\s*e?\s*≈?\s*[\d.]+\s*倍|大\s*\d+\s*倍"), "ambiguous 「相差 N 倍」/「大 N 倍」"),
    (re.compile(r"拿回了"), "「拿回了」 with a signed number"),
    (re.compile(r"top-p"), "breakable 「top-p」 (write top‑p with U+2011)"),
    (re.compile(r"[。，、；：！？）」]\*\*[ \t]+(?=\S)"), "space after full-width punctuation (behind a closing **)"),
    (re.compile(rf"[{CJK}]\*\*[A-Za-z]|[A-Za-z]\*\*[{CJK}]"), "no space between CJK and a Latin term across **"),
    (re.compile(r"）（"), "two parentheses in a row"),
    (re.compile(rf"[{CJK}]–[{CJK}]"), "an en dash joining Chinese words (English habit)"),
    (re.compile(r'"[^"\n]+"'), "ASCII double quotes in Chinese text"),
    (re.compile(r"[長长高多]\s*[十百千\d]+\s*倍|大\s*[十百千]+\s*倍"), "ambiguous 「長十倍」: write 「是……的十倍」"),
    (re.compile(r"[\dX] B(?![A-Za-z0-9])"), "billions as 「B」 (write 億 / 亿)"),
    (re.compile(r"分剩下的[：，。]"), "clipped 「分剩下的」: 分攤剩下的機率"),
]
VARIANTS = {
    "zh-Hant": [
        (re.compile(r"提示文字"), "prompt is 提示詞"),
        (re.compile(r"旋轉位置嵌入"), "RoPE is 旋轉位置編碼"),
        (re.compile(r"(?<![/／])KV\s*頭"), "key/value head is K/V 頭"),
        (re.compile(r"「試試看」"), "the section is 「動手試試」"),
        (re.compile(r"詞彙數|個詞彙中|詞彙表的項目|其餘 ?\{?\w*\}? ?個項目"), "vocabulary entry is 詞條"),
        (re.compile(r"權重共用"), "tied embeddings is 權重共享"),
        (re.compile(r"占"), "佔, not 占"),
        (re.compile(r"斜紋"), "歸納斜線, not 斜紋"),
        (re.compile(r"(?<!位)置中"), "center data is 中心化, not 置中"),
        (re.compile(r"一袋"), "calque of 'bag of vectors'"),
        (re.compile(r"(?<!演)算法"), "algorithm is 演算法"),
        (re.compile(r"第一名猜測"), "calque of 'top guess'"),
        (re.compile(r"剛好達到"), "top-p keeps at least p (至少達到)"),
        (re.compile(r"简体|简|体中文"), "Simplified characters in a Traditional text"),
        (re.compile(r"規格的形狀|形狀的模型|本身的形狀|公開的形狀"), "a model has 架構參數, not a 形狀"),
        (re.compile(r"查詢表"), "lookup table is 查找表"),
        (re.compile(r"平均地任選|沒被平均利用|平均亂猜"), "平均 means 'on average' (uniformly: 均勻)"),
        (re.compile(r"[貓狗魚牛馬鳥羊豬雞兔][^。！？「」]{0,12}它"), "an animal is 牠 in Taiwan usage"),
    ],
    "zh-Hans": [
        (re.compile(r"提示文字"), "prompt is 提示词"),
        (re.compile(r"旋转位置嵌入"), "RoPE is 旋转位置编码"),
        (re.compile(r"K/V\s*头"), "key/value head is KV 头"),
        (re.compile(r"“试一试”|「试一试」"), "the section is “动手试试”"),
        (re.compile(r"模块"), "block is 块"),
        (re.compile(r"核对"), "check is 验算"),
        (re.compile(r"条目"), "vocabulary entry is 词条"),
        (re.compile(r"已屏蔽"), "the causal mask is 因果掩码"),
        (re.compile(r"个数(?![字值据])"), "「个数」 reads as 'count': write 个数值 or 个数字"),
        (re.compile(r"掰弯"), "slang; write 弯折"),
        (re.compile(r"分享剩下"), "divide a quantity: 分摊"),
        (re.compile(r"一袋"), "calque of 'bag of vectors'"),
        (re.compile(r"刚好达到"), "top-p keeps at least p (至少达到)"),
        (re.compile(r"繁體|體中文"), "Traditional characters in a Simplified text"),
        (re.compile(r"形状的模型|本身的形状|公开的形状"), "a model has 架构参数, not a 形状"),
        (re.compile(r"查询表"), "lookup table is 查找表"),
        (re.compile(r"平均瞎猜|平均乱猜"), "平均 means 'on average' (uniformly: 均匀)"),
        (re.compile(r"从前从前"), "a Taiwan storytelling opener (从前 / 很久很久以前)"),
        (re.compile(r"台湾最高的山"), "a mainland example asks about 中国"),
    ],
}


_SENTENCE_END = "。，、；：！？"


def bold_slips(prose: str) -> list[str]:
    """Bold spans that end in 「。」「：」...: CommonMark closes ``**`` after punctuation only
    before a space or more punctuation, so 「**實際算一次。**蘋果」 stays open and the old fix,
    「**實際算一次。** 蘋果」, shows a space after 「。」. The mark goes after the bold: 「**實際算一次**。」"""
    parts = prose.split("**")
    return [f"punctuation inside the end of a bold span: …**{parts[i][-12:]}**{parts[i + 1][:6]}…"
            for i in range(1, len(parts) - 1, 2)
            if parts[i] and parts[i][-1] in _SENTENCE_END and parts[i + 1][:1] not in ("", "\n")]


def problems(text: str, lang: str) -> list[str]:
    """What is wrong with one Chinese string (maths, code spans and {fields} are skipped)."""
    prose = _MATH_OR_CODE.sub("X", text)
    found = bold_slips(prose)
    for pattern, why in COMMON + VARIANTS[lang]:
        for m in pattern.finditer(prose):
            start = max(0, m.start() - 12)
            found.append(f"{why}: …{prose[start:m.end() + 12]!r}…")
    return found


def strings(name: str, lang: str, kind: str) -> dict[str, str]:
    if kind == "catalog":
        return load_catalog(name, lang)
    return i18n.lesson_sections(name, lang)


CASES = [(kind, name, lang) for lang in ("zh-Hant", "zh-Hans")
         for kind, names in (("catalog", catalog_files()), ("lesson", lesson_files())) for name in names]


@pytest.mark.parametrize("kind,name,lang", CASES, ids=[f"{k}-{n or 'app'}-{lang}" for k, n, lang in CASES])
def test_chinese_typography_and_terms(kind, name, lang):
    bad = [f"{key}: {p}" for key, text in strings(name, lang, kind).items() for p in problems(text, lang)]
    assert not bad, f"{kind} {name or 'app'} ({lang}):\n" + "\n".join(bad)


@pytest.mark.parametrize("text,lang", [
    ("詞元 (token)", "zh-Hant"), ("好。 接著", "zh-Hant"), ("等一下…", "zh-Hans"), ("猫在*睡觉*", "zh-Hans"),
    ("你的提示文字", "zh-Hant"), ("9 个查询头、3 个 K/V 头", "zh-Hans"), ("134.5 M 個參數", "zh-Hant"),
    ("經過第一個模块", "zh-Hans"), ("第 17, 18 层", "zh-Hans"), ("在 cpu 上", "zh-Hant"),
    # The second Chinese review (B4, T1-T4, T7, T8, T10, B10, S1-S3):
    ("**實際算一次。** 蘋果的編號", "zh-Hant"), ("**你這次的訓練。**第 0 步", "zh-Hant"), ("**MoE 計算器：** 共用", "zh-Hans"),
    ("在 V 個詞元中平均亂猜", "zh-Hant"), ("在 V 个词元中平均瞎猜", "zh-Hans"), ("都比前一個長十倍", "zh-Hant"),
    ("分詞器是**SentencePiece 式的 BPE**", "zh-Hant"), ("也就是**logit（原始分数）**", "zh-Hans"),
    ("旋轉位置編碼（RoPE）（Su 等人，2021）", "zh-Hant"), ("其餘 9 個詞元分剩下的：", "zh-Hant"),
    ("個查詢–鍵組合", "zh-Hant"), ('用 "The cat that I saw yesterday was"', "zh-Hans"),
    ("貓坐在墊子上，因為它累了。", "zh-Hant"), ("總共 {total} B、每個詞元 46.7 B", "zh-Hant"), ("台湾最高的山是", "zh-Hans"), ("从前从前，有一个小机器人", "zh-Hans"),
])
def test_the_checker_catches_the_reviewed_slips(text, lang):
    assert problems(text, lang)


@pytest.mark.parametrize("text,lang", [
    ("詞元（token）、注意力（attention）", "zh-Hant"), ("好。接著", "zh-Hant"), ("等一下……", "zh-Hans"),
    ("猫在**睡觉**", "zh-Hans"), ("9 個查詢頭、3 個 K/V 頭", "zh-Hant"), ("公式 $f(x)$ 是", "zh-Hans"),
    ("約 1.35 億個參數", "zh-Hant"), ("- 第一項\n- 第二項", "zh-Hant"),
    ("**實際算一次**。蘋果的編號", "zh-Hant"), ("分詞器是 **SentencePiece 式的 BPE**", "zh-Hant"),
    ("貓坐在墊子上，因為牠累了。", "zh-Hant"), ("猫坐在垫子上，因为它累了。", "zh-Hans"), ("都是前一個的十倍", "zh-Hant"),
    ("**粗體**：說明", "zh-Hant"), ("**一整行的標題？**", "zh-Hans"), ("獎盃放不進箱子，因為它太大了。", "zh-Hant"),
])
def test_the_checker_passes_good_text(text, lang):
    assert not problems(text, lang)


@pytest.mark.parametrize("source,rendered", [
    ("**自迴歸生成**\n（autoregressive）", "**自迴歸生成**（autoregressive）"),   # no space before 「（」
    ("好。\nLLaMA 是", "好。LLaMA 是"),                                            # no space after 「。」
    ("接著**前饋網路（FFN）**\n各自", "接著**前饋網路（FFN）**\n各自"),             # joined, ** would not close
    ("第一行\n- 第二項", "第一行\n- 第二項"),                                        # a list stays a list
])
def test_line_joining(source, rendered):
    assert i18n._CJK_BREAK.sub("", source) == rendered


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_no_closing_punctuation_after_a_formula_in_the_last_position_section(lang):
    """Review B13: 「（$d_{model} \\times V$，」 put 「，」 at a line start at 1024 px (a line may
    break between a formula and the text after it). The sentence now goes on after the formula."""
    text = i18n.lesson_sections("sampling", lang)["last"]
    assert not re.search(r"\$[，。、；：！？）」]", text), text
