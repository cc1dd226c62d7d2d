"""Judgement: one question per candidate tool, its yes-probability, and search ranking with it."""

import math

import pytest

from stack.agent.llm_client import _alternatives
from stack.toolsearch.judge import INSTRUCTION, MAX_REQUEST_CHARS, QUESTION, judge_messages, yes_probability
from stack.toolsearch.retrieval import ToolDoc, ToolIndex

REQUEST = "Bump payments-worker to 6 copies in the billing namespace, Black Friday is coming"
CLUSTER = [
    ToolDoc("stripe__update_subscription", "Update the quantity of a customer's billing subscription."),
    ToolDoc("stripe__list_payment_intents", "List payments and their billing status."),
    ToolDoc("kubernetes__pods_list", "List the pods in a namespace."),
    ToolDoc("kubernetes__resources_scale", "Scale a deployment in a namespace to a number of replicas."),
    ToolDoc("mail__send_email", "Send an email message."),
]


def test_the_question_puts_the_request_before_the_tool_so_questions_share_their_opening():
    first = judge_messages(f"  {REQUEST}  ", "kubernetes__resources_scale",
                           "Scale a deployment to a number of replicas. Works for stateful sets too.")
    second = judge_messages(REQUEST, "mail__send_email", "Send an email message.")
    assert first[0] == second[0] == {"role": "system", "content": INSTRUCTION}
    text = first[1]["content"]
    assert text == (f"Message: {REQUEST}\n\nTool: resources_scale (kubernetes): Scale a deployment to a "
                    f"number of replicas.\n\n{QUESTION}")
    opening = text.index("Tool:")
    assert second[1]["content"][:opening] == text[:opening]
    assert "Tool: bare: Does it.\n" in judge_messages("x", "bare", "Does it.")[1]["content"]
    assert len(judge_messages("x" * 5000, "t", "d")[1]["content"]) < MAX_REQUEST_CHARS + 200


def test_the_yes_probability_comes_from_the_first_token_else_from_the_answer():
    alternatives = {"Yes": math.log(0.6), "yes": math.log(0.1), " No": math.log(0.2), "Maybe": math.log(0.1)}
    assert yes_probability("Yes", alternatives) == pytest.approx(0.7 / 0.9)
    assert yes_probability("No.", None) == 0.0
    assert yes_probability("yes, it can", {}) == 1.0
    assert yes_probability("Maybe", {"Maybe": 0.0}) is None
    assert yes_probability("", None) is None


def test_openai_logprobs_are_read_as_alternatives_per_token():
    content = [{"token": "Yes", "logprob": -0.1, "top_logprobs": [{"token": "Yes", "logprob": -0.1},
                                                                  {"token": "No", "logprob": -2.5}]},
               {"token": ".", "logprob": -0.3}]
    assert _alternatives({"content": content}) == [{"Yes": -0.1, "No": -2.5}, {".": -0.3}]
    assert _alternatives(None) == [] and _alternatives({"content": None}) == []
    assert _alternatives({"content": ["junk", {"token": "x", "logprob": "high"}]}) == [{}]


def test_judged_hits_are_reordered_by_the_model_and_come_before_the_rest():
    index = ToolIndex(CLUSTER)
    plain = [h.name for h in index.search(REQUEST, 5)]
    assert plain == ["stripe__list_payment_intents", "kubernetes__pods_list", "kubernetes__resources_scale",
                     "stripe__update_subscription"]
    # the model judged the first three (its time ran out before the fourth)
    judged = {"stripe__list_payment_intents": 0.05, "kubernetes__pods_list": 0.05,
              "kubernetes__resources_scale": 0.95}
    hits = index.search(REQUEST, 5, judged=judged)
    assert [h.name for h in hits] == ["kubernetes__resources_scale", "stripe__list_payment_intents",
                                      "kubernetes__pods_list", "stripe__update_subscription"]
    assert [h.name for h in index.search(REQUEST, 1, judged=judged)] == ["kubernetes__resources_scale"]
    # one judgement for every hit, all alike: search's own order stands
    same = [h.name for h in index.search(REQUEST, 5, judged={name: 0.5 for name in plain})]
    assert same == plain
