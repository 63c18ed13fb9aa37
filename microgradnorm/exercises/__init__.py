"""Exercises: the learner writes the backward pass; a grader says precisely what is wrong.

The modules, in the order data flows through them:

* :mod:`.catalog`: the exercises in order of difficulty, their files, their hints
  (standard library only, so listing them is fast);
* :mod:`.workspace`: the learner's copies of the scaffolds and their progress;
* :mod:`.problems`: inputs, right answers (closed forms, scalar engine) and known
  mistakes of each exercise;
* :mod:`.runner`: what runs in the child process, around the learner's code;
* :mod:`.grader`: starts that process, judges what comes back;
* :mod:`.diagnose`: names the mistake in a wrong answer;
* :mod:`.render`: rich renderables of all of the above.

This package's ``__init__`` imports nothing, so the child process that runs
learner code starts with as little as possible loaded.
"""
