"""Step-through lessons in the terminal.

Lesson prose lives in Markdown files (``lessons/NN-slug.md`` in the repository,
shipped inside the wheel as ``microgradnorm/lessons/content``); every number a
lesson shows comes from a *demo*, a Python function registered by name in
:mod:`microgradnorm.lessons.demos` that computes it live with the engine.

* :mod:`~microgradnorm.lessons.format` parses and validates lesson files;
* :mod:`~microgradnorm.lessons.demos` is the registry of demos;
* :mod:`~microgradnorm.lessons.render` turns steps into rich renderables (pure);
* :mod:`~microgradnorm.lessons.runner` pages through a lesson (keys or ``--auto``);
* :mod:`~microgradnorm.lessons.progress` remembers where the learner stopped.

The format for lesson authors is documented in ``lessons/FORMAT.md``.
"""

from __future__ import annotations
