"""A request's tasks (agent/tasks.py): the rule both the agent's and proxy mode's next step keep."""

from stack.agent.tasks import LEFT, next_step_request, task_count, tasks_done, tasks_left

TWO_ES = "Ejecuta `df -h` en la consola y luego guarda lo que imprima en las notas."
TWO_DE = "Führen Sie `df -h` aus und halten Sie die Ausgabe in Ihren Notizen fest."


def test_a_single_task_is_done_once_one_tool_ran():
    assert task_count("how full is the disk?") == 1
    assert not tasks_done("how full is the disk?", 0, named_left=False)
    assert tasks_done("how full is the disk?", 1, named_left=False)


def test_two_tasks_need_two_tools_and_none_named_left():
    assert task_count(TWO_ES) == 2
    assert not tasks_done(TWO_ES, 1, named_left=False)
    assert tasks_done(TWO_ES, 2, named_left=False)
    assert not tasks_done(TWO_ES, 2, named_left=True)


def test_the_part_not_done_is_the_request_s_own_words_after_the_tasks_that_ran():
    assert tasks_left(TWO_ES, 1) == "guarda lo que imprima en las notas."
    assert tasks_left(TWO_DE, 1) == "halten Sie die Ausgabe in Ihren Notizen fest."
    assert tasks_left(TWO_ES, 0) == "" and tasks_left(TWO_ES, 2) == ""
    assert tasks_left("how full is the disk?", 1) == ""


def test_the_next_step_reads_the_whole_request_and_what_is_left_of_it():
    assert next_step_request(TWO_ES, 0) == TWO_ES
    asked = next_step_request(TWO_ES, 1)
    assert asked.startswith(TWO_ES) and asked.endswith(LEFT.format(left="guarda lo que imprima en las notas."))
    assert next_step_request("how full is the disk?", 1) == "how full is the disk?"


def test_a_rendering_with_fewer_tasks_than_the_user_s_commas_counts():
    """German sets a relative clause off with commas; the English rendering holds the two tasks."""
    german = ("Suchen Sie bitte in meinen Notizen nach dem Wort Kiwi und schreiben Sie die Datei, in der es "
              "steht, in meine Aufgabenliste.")
    english = "Please search my notes for the word kiwi and write the file in which it appears on my task list."
    assert task_count(german) == 4 and task_count(german, english) == 2
    assert tasks_done(german, 2, named_left=False, english=english)
    assert not tasks_done(german, 2, named_left=False)
    assert task_count(TWO_ES, "Run `df -h` in the console") == 1 and task_count(TWO_ES, "") == 2


def test_a_rendering_counts_the_tasks_of_a_language_the_split_does_not_know():
    """The clause split knows no Dutch or Polish conjunction: their words alone are one task."""
    dutch = "Kijk even hoeveel schijfruimte er vrij is en schrijf dat op in mijn notities."
    english = "Check how much disk space is free and write that down in my notes."
    assert task_count(dutch) == 1 and task_count(dutch, english) == 2
    assert not tasks_done(dutch, 1, named_left=False, english=english)
    assert tasks_done(dutch, 2, named_left=False, english=english)


def test_a_request_in_a_script_without_spaces_splits_at_its_own_commas():
    # each Chinese or Japanese letter is a word, and their full-width commas end a clause
    zh = "先用终端查一下磁盘空间，然后把结果写进笔记里"
    ja = "ターミナルでディスクの空きを調べて、結果をメモに書いておいて"
    assert task_count(zh) == 2 and task_count(ja) == 2
    assert tasks_left(zh, 1) == "然后把结果写进笔记里"
    assert task_count("帮我看看磁盘还剩多少空间") == 1
