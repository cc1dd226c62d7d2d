"""Restatement: the request retold as the tool it needs, ranked together with the request."""

from stack.toolsearch.restate import INSTRUCTION, MAX_REQUEST_CHARS, parse_restatement, restate_messages
from stack.toolsearch.retrieval import ToolDoc, ToolIndex


def doc(name, description):
    return ToolDoc(name, description, {"properties": {}})


BILLING = [
    doc("stripe__cancel_subscription", "Cancel a customer's active subscription."),
    doc("stripe__create_refund", "Refund a charge to the customer's card."),
    doc("crm__archive_company", "Archive a company record when a customer leaves."),
    *(doc(f"stripe__{verb}_plan", f"{verb.title()} a subscription plan and its billing price.")
      for verb in ("create", "update", "list", "get", "delete", "archive")),
    doc("mail__send_email", "Send an email message to a recipient."),
]
REQUEST = "Acme Corp is leaving us, stop charging them"


def names(hits):
    return [hit.name for hit in hits]


def test_the_question_is_the_instruction_worked_answers_and_the_request_cut_to_its_opening():
    messages = restate_messages("  stop charging Acme  ")
    assert messages[0] == {"role": "system", "content": INSTRUCTION}
    assert [m["role"] for m in messages[1:-1]] == ["user", "assistant"] * 3
    assert messages[-1] == {"role": "user", "content": "stop charging Acme"}
    assert len(restate_messages("x" * 5000)[-1]["content"]) == MAX_REQUEST_CHARS


def test_a_restatement_is_its_task_lines_without_marks_introductions_repeats_or_prose():
    answer = ("Here is what the tool must do:\n1. cancel a customer's subscription in Stripe\n"
              "- \"send an email to the customer\"\n" + "and then " * 12 + "\n\n"
              "* cancel a customer's subscription in Stripe\nrefund the last charge\nfourth task")
    assert parse_restatement(answer) == ("cancel a customer's subscription in Stripe",
                                         "send an email to the customer", "refund the last charge")
    assert parse_restatement("") == ()


def test_a_restatement_ranks_the_tool_the_request_shares_no_word_with():
    index = ToolIndex(BILLING, method="bm25")
    assert names(index.search(REQUEST, 3))[0] != "stripe__cancel_subscription"
    restated = ("cancel the customer's subscription",)
    assert names(index.search(REQUEST, 3, restated))[0] == "stripe__cancel_subscription"


def test_the_request_keeps_the_larger_share_of_the_score():
    # a restatement that lost the product the user named does not outvote the request
    index = ToolIndex(BILLING, method="bm25")
    request = "send an email to Acme about their subscription"
    assert names(index.search(request, 1, ("cancel the customer's subscription",))) == [
        "mail__send_email"]


def test_each_restated_task_gets_its_best_tool_on_the_first_page():
    index = ToolIndex(BILLING, method="bm25")
    request = "our subscription plan billing price for Acme is wrong, sort it out with them"
    one_task = names(index.search(request, 5, ("update the subscription plan price",)))
    assert "mail__send_email" not in one_task  # six plan tools fit the request better
    two_tasks = names(index.search(request, 5, ("update the subscription plan price",
                                                "send an email to the customer")))
    assert "mail__send_email" in two_tasks and two_tasks[0] == one_task[0]
