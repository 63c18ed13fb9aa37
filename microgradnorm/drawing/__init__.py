"""Drawing shared by the lessons, the lab and the exercises: terminal charts (:mod:`.charts`), braille
pictures of a plane (:mod:`.braille`) and SVG figures (:mod:`.figure`).

Pure: each takes numbers and returns a rich renderable or an SVG string; nothing here knows a lesson, an
experiment or an exercise, so every feature imports it and it imports none of them.
"""
