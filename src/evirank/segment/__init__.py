"""Segmenters: a candidate Run with document text -> a Passages frame (sentences or word windows).

``Sentences`` follows Birch (sentences, long ones cut into token-bounded chunks that keep
every word); ``Windows`` follows Dai & Callan (150-word windows, stride 75, title prepended)
and Steensland (long titles not prepended); ``Whole`` keeps
short texts (tweets, passages) as one segment. Both cut only between whitespace-delimited
words and never lose a document: one with no text yields its title, one with neither an
empty segment.
:class:`SegmentSpec` parses the one ``--segment`` grammar (``sentences:prepend``,
``windows:150:75``, ``whole:skip``) and gives every spec its canonical string.

Example:
    >>> import pandas as pd
    >>> run = pd.DataFrame({"qid": ["1", "2"], "query": ["q1", "q2"], "docno": ["d1", "d1"],
    ...                     "score": [2.0, 1.0], "rank": [1, 1], "title": ["T", "T"],
    ...                     "text": ["One. Two.", "One. Two."]})
    >>> Sentences()(run)[["qid", "pid", "text"]].values.tolist()
    [['1', 0, 'T'], ['1', 1, 'One.'], ['1', 2, 'Two.'], ['2', 0, 'T'], ['2', 1, 'One.'], ['2', 2, 'Two.']]
"""

from __future__ import annotations

from evirank.segment.base import Segmenter
from evirank.segment.segment_spec import SegmentSpec, SegmentSpecError, parse_segment, spec_of
from evirank.segment.sentences import Sentences, count_tokens_with
from evirank.segment.whole import Whole
from evirank.segment.windows import Windows, window_starts

__all__ = [
    "SegmentSpec",
    "SegmentSpecError",
    "Segmenter",
    "Sentences",
    "Whole",
    "Windows",
    "count_tokens_with",
    "parse_segment",
    "spec_of",
    "window_starts",
]
