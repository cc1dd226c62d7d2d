"""Which requests the tool index gets in English (agent/english.py), and how a rendering is read."""

import pytest

from stack.agent.english import _translation, beside, index_text, needs_rendering


@pytest.mark.parametrize("request_", [
    "Kannst du mir bitte sagen, wie viel Speicher auf der Festplatte noch frei ist?",
    "Apúntame que mañana tengo que llamar al dentista a las diez.",
    "Montre-moi ce qu'il y a dans le fichier recettes.txt, s'il te plaît.",
    "Guarda nas notas que a reunião foi adiada para sexta-feira.",
    "Zet even in mijn lijstje dat ik brood moet kopen.",
    # scripts written without spaces: each letter is a word, and none is English
    "帮我看看磁盘还剩多少空间",
    "明日の会議のことをメモしておいて",
    "ช่วยจดไว้ว่าพรุ่งนี้ต้องซื้อนม",
    # the embedder's vocabulary holds words in other alphabets too; they are not English
    "Запиши, пожалуйста, что завтра встреча в десять.",
])
def test_a_request_in_another_language_is_rendered(request_):
    assert needs_rendering(request_)


@pytest.mark.parametrize("request_", [
    "Make a new folder called invoices.",               # terse: few filler words, all English
    "could you check how much disk space is left on this laptop?",
    "Create report.md listing three colours: red, green, blue.",
    "ok danke",                                          # too short to tell
    "Run `ls -la ~/Downloads | wc -l` please",
])
def test_an_english_or_too_short_request_is_not(request_):
    assert not needs_rendering(request_)


def test_a_rendering_is_read_only_from_the_grammar_s_object():
    assert _translation('{"english": " Save it. "}') == "Save it."
    assert _translation("Here is the translation: Save it.") == ""  # an upstream that ignored the grammar
    assert _translation('{"text": "Save it."}') == "" and _translation('["Save it."]') == ""


def test_the_index_reads_the_rendering_and_the_decision_both():
    assert index_text("Speichere das.", "Save that.") == "Save that."
    assert index_text("Save that.", "") == "Save that."
    assert beside("Speichere das.", "Save that.") == "Speichere das.\n(In English: Save that.)"
    assert beside("Save that.", "Save that.") == "Save that."
