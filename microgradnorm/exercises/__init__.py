"""Exercises: the learner writes the backward pass; a grader says precisely what is wrong.

The modules, in the order data flows through them:

* :mod:`.catalog`: the exercises in order of difficulty, their files, their hints
  (standard library only, so listing them is fast);
* :mod:`.workspace`: the learner's copies of the scaffolds and their progress;
* :mod:`.problems`: inputs, right answers (closed forms, scalar engine) and known
  mistakes of each exercise (:mod:`.norm_mistakes` for the normalizations), and
  :mod:`.rounding`, how close a right answer must be;
* :mod:`.grader`: reads the learner's file, runs it (:mod:`.process`), judges
  what came back (:mod:`.judge`);
* :mod:`.process` (grading side), :mod:`.supervisor`, :mod:`.runner` and
  :mod:`.drivers` (child side), talking over :mod:`.wire`: the learner's code in
  a separate process, held in by the kernel (:mod:`.landlock` for files,
  :mod:`.seccomp` for everything else) and by :mod:`.sandbox` (the audit hook);
* :mod:`.diagnose`: names the mistake in a wrong answer, as data;
  :mod:`.messages`: every sentence of the grader, in one place;
* :mod:`.render` and :mod:`.watch`: rich renderables, and ``exercise watch``.

What the grader guarantees, and what it does not, is in ``docs/grader.md``.
This package's ``__init__`` imports nothing; the child process that runs learner
code never imports the package at all (it loads the few files it needs by path).
"""
