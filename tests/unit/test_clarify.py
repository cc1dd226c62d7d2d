"""The clarify tool's precondition: a question for the user is not their own message again."""

import pytest

from stack.tools.clarify import asks_something_new


@pytest.mark.parametrize("question, asked", [
    ("Could you pull up http://127.0.0.1:8000/hours.html and tell me when they open on Saturday?", False),
    ("could you pull up http://127.0.0.1:8000/hours.html and tell me when they open on saturday", False),
    ("Change what to which other one?", True),
    ("Which file do you mean?", True),
])
def test_a_question_that_repeats_the_request_is_not_asked(question, asked):
    request = "Could you pull up http://127.0.0.1:8000/hours.html and tell me when they open on Saturday?"
    if question.startswith("Change") or question.startswith("Which"):
        request = "change it to the other one"
    reason = asks_something_new({"question": question}, request, "")
    assert (reason is None) is asked
    if not asked:
        assert "the user's own message" in reason
