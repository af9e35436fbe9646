"""The tokens lesson's "What to notice", branch by branch, without running the app or a model."""

from types import SimpleNamespace as Tok

import pytest

from course.notices import tokens as N

pytestmark = pytest.mark.unit


def tok(text, id, data=None):
    return Tok(text=text, id=id, bytes=data if data is not None else text.encode())


def group(text, tokens, dropped=b""):
    return Tok(text=text, tokens=tokens, dropped=dropped)


def label(t):
    return f"`{t.text}`"


def char(text):
    return f"«{text}»"


def code_point(text):
    return " ".join(f"U+{ord(ch):04X}" for ch in text)


def join(items):
    return ", ".join(items)


def test_counts_notice():
    assert N.counts_notice(chars=1234, utf8_bytes=2345, tokens=500, chars_per_token=2.468) == (
        "notice.counts", dict(chars="1,234", bytes="2,345", tokens="500", cpt="2.47"))


def test_a_split_character_prefers_one_that_lost_no_byte():
    lost = group("\U00040000", [tok("<80>", 1)], dropped=b"\xf1")
    whole = group("貓", [tok("<E8>", 2), tok("<B2>", 3), tok("<93>", 4)])
    assert N.split_notice(split=[lost, whole], sentencepiece=False, char=char, code_point=code_point) == (
        "notice.split", dict(n=2, char="«貓»", pieces="`<E8>` + `<B2>` + `<93>`"))


def test_a_split_character_that_lost_bytes_says_which():
    lost = group("\U00040000", [tok("<80>", 1), tok("<80>", 1)], dropped=b"\xf1\x80")
    assert N.split_notice(split=[lost], sentencepiece=False, char=char, code_point=code_point) == (
        "notice.split_dropped", dict(n=1, char="U+40000", pieces="`<80>` + `<80>`", dropped="F1 80"))


@pytest.mark.parametrize("sentencepiece, key", [(False, "notice.no_split"), (True, "notice.no_split_sp")])
def test_no_split_character(sentencepiece, key):
    assert N.split_notice(split=[], sentencepiece=sentencepiece, char=char, code_point=code_point) == (key, {})


def test_longest_token_takes_the_lower_id_on_a_tie():
    ordinary = [tok(" cat", 30), tok(" dog", 20), tok("a", 5)]
    assert N.longest_notice(ordinary=ordinary, label=label) == [("notice.longest", dict(token="` dog`", n=4))]
    assert N.longest_notice(ordinary=[], label=label) == []


def ids(merged, offset=True, follow=False, first=256):
    return N.ids_notice(merged=merged, label=label, rank_is_id_offset=offset, merges_follow_ids=follow,
                        merged_first=first, n_merges=48900, common_rules=1000)


def test_ids_need_two_different_merged_pieces():
    assert ids([]) == [] and ids([tok("the", 300), tok("the", 300)]) == []


def test_byte_level_ids_read_as_merge_ranks():
    found = ids([tok(" the", 1000), tok("ing", 300), tok(" cat", 5000)])
    assert found == [("notice.ids_common", dict(low="`ing`", low_id="300", high="` cat`", high_id="5,000",
                                                low_rank="44", high_rank="4,744", merges="48,900", limit="1,000"))]
    assert ids([tok(" the", 2000), tok(" cat", 5000)])[0][0] == "notice.ids"


def test_sentencepiece_ids_follow_the_merges_or_say_nothing():
    found = ids([tok("▁the", 506), tok("▁cat", 8756)], offset=False, follow=True, first=None)
    assert found == [("notice.ids_sp", dict(low="`▁the`", low_id="506", high="`▁cat`", high_id="8,756"))]
    assert ids([tok("▁the", 506), tok("▁cat", 8756)], offset=False, follow=False, first=None) == []


def test_chars_notice_lists_four_distinct_characters():
    found = N.chars_notice(char_ids=[238000, 238001, 238000, 238002, 238003, 238004], total=9, char_first=236000,
                           example=lambda i: f"#{i}", join=join)
    assert found == [("notice.chars_sp", dict(n=6, total=9, first="236,000",
                                              examples="#238000, #238001, #238002, #238003"))]
    assert N.chars_notice(char_ids=[], total=9, char_first=236000, example=str, join=join) == []
    assert N.chars_notice(char_ids=[5], total=9, char_first=None, example=str, join=join) == []


def test_digits_notice():
    assert N.digits_notice(n_digits=0) == []
    assert N.digits_notice(n_digits=3) == [("notice.digits", {"n": 3})]


def test_cost_notice_sums_the_parallel_sentences():
    assert N.cost_notice(parallel=[[10, 15, 14], [20, 27, 26]], zh_chars=(24, 24)) == (
        "notice.cost", dict(en=30, hant=42, hans=40, n=2, ratio_hant="1.40", ratio_hans="1.33", cpt_hant="0.57",
                            cpt_hans="0.60"))


def test_letters_notice_passes_its_fields():
    assert N.letters_notice(word="`strawberry`", letter="`r`", count=3, pieces="`·str` `aw` `berry`") == (
        "notice.letters", dict(word="`strawberry`", letter="`r`", count=3, pieces="`·str` `aw` `berry`"))


def chat(**changes):
    args = dict(templated=True, tokens=12, added=0, chat_tokens=40, chat_specials=7, typed=[], bos="`<bos>`",
                eos="`<|im_end|>`", typed_label=lambda t: f"`{t.text}` ({t.id})", join=join)
    return N.chat_notices(**(args | changes))


def test_chat_template_counts_what_it_adds():
    assert chat() == [("notice.chat", dict(n="12", m="40", added=7, eos="`<|im_end|>`"))]


def test_typed_special_tokens_are_told_apart_and_listed_up_to_six():
    typed = [tok(f"<s{i}>", i) for i in range(8)]
    found = chat(typed=typed)
    assert found[0] == ("notice.chat", dict(n="12", m="40", added=-1, eos="`<|im_end|>`"))
    assert found[1] == ("notice.chat_typed", dict(n=8, tokens=", ".join(f"`<s{i}>` ({i})" for i in range(6))))


def test_a_base_model_has_no_template():
    found = chat(templated=False, tokens=1234, added=1, typed=[tok("<start_of_turn>", 105)])
    assert found == [("notice.no_chat", dict(n="1,234", m="1,235", bos="`<bos>`", eos="`<|im_end|>`")),
                     ("notice.chat_typed", dict(n=1, tokens="`<start_of_turn>` (105)"))]


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    from course import i18n
    produced = {"notice.counts", "notice.split", "notice.split_dropped", "notice.no_split", "notice.no_split_sp",
                "notice.longest", "notice.ids", "notice.ids_common", "notice.ids_sp", "notice.chars_sp",
                "notice.digits", "notice.cost", "notice.letters", "notice.chat", "notice.no_chat",
                "notice.chat_typed"}
    for lang in ("en", "zh-Hant", "zh-Hans"):
        catalog = i18n.catalog(lang)
        assert [k for k in produced if f"tokens.{k}" not in catalog] == [], lang


def test_cost_ratios_keep_a_one_token_difference():
    """36 and 35 tokens against 47 read 0.77 and 0.74, not 0.8 and 0.7 (the review's numbers)."""
    _, fields = N.cost_notice(parallel=[[47, 36, 35]], zh_chars=(40, 40))
    assert (fields["ratio_hant"], fields["ratio_hans"]) == ("0.77", "0.74")


def test_parts_notice_says_what_the_model_receives():
    join = ", ".join
    assert N.parts_notice(char="森", part="木", count=3, char_ids=[1234], part_ids=[56], join=join) == (
        "parts.one", dict(char="森", part="木", count=3, id="1,234", part_id="56", n=1))
    key, fields = N.parts_notice(char="森", part="木", count=3, char_ids=[10, 11], part_ids=[12, 13], join=join)
    assert key == "parts.pieces" and fields["n"] == 2 and fields["id"] == "10, 11"
    assert N.parts_notice(char="森", part="木", count=3, char_ids=[10, 11], part_ids=[10, 13], join=join)[0] == "parts.shared"
