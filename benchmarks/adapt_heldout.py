"""Does an adapted bi-encoder do its training task better on documents it never saw? A label-free check.

``evirank adapt --sample-documents N`` trains on N documents drawn with its seed; the others were never
seen. This draws up to ``--held-out`` of those and asks each model three tasks built from them alone:
a random span of a document (``--crop-words``, as trained) against the other held-out documents'
spans, the same span against the whole documents, and the Inverse Cloze Task (a sentence against the
sentences either side of it, itself removed; documents of two sentences or more). It prints the mean
reciprocal rank of the document's own text and the share ranked first, per model. No query and no
judgement is read: the check is what a user without labels could run (docs/results.md measures how
well it predicts the ranking: it does not).

Usage:
    PYTHONPATH=src python benchmarks/adapt_heldout.py --corpus CORPUS --sample-documents 5184 \\
        --crop-words 4 12 --model zero-shot --model models/mb2013-crop --model models/mb2013-crop-wise07
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from _common import footer, header

from evirank import markdown
from evirank.frames import QUERY, TEXT
from evirank.io.corpus import read_corpus
from evirank.score.families.bi import BiEncoder
from evirank.train.adaptation import draw_documents
from evirank.train.pseudo import DOCNO_OF, SplitDocument, crop_examples, ict_examples, split_documents

ZERO_SHOT = "zero-shot"


def held_out(documents: list[SplitDocument], trained_on: int, seed: int, n: int) -> list[SplitDocument]:
    """Up to ``n`` documents (corpus order) that adaptation with ``trained_on`` and ``seed`` did not draw."""
    seen = {doc.docno for doc in draw_documents(documents, trained_on, seed)}
    unseen = [doc for doc in documents if doc.docno not in seen]
    if len(unseen) > n:
        keep = np.sort(np.random.default_rng(7).choice(len(unseen), size=n, replace=False))
        unseen = [unseen[i] for i in keep.tolist()]
    return unseen


def tasks(documents: list[SplitDocument], crop_words: tuple[int, int]) -> dict[str, pd.DataFrame]:
    """Each task's (query, the document's own text) rows; the other rows' texts are the candidates."""
    low, high = crop_words
    whole = {doc.docno: f"{doc.title} {' '.join(doc.sentences)}".strip() for doc in documents}
    spans = crop_examples(documents, min_words=low, max_words=high, seed=1001)
    against_whole = crop_examples(documents, min_words=low, max_words=high, seed=2002)
    several = [doc for doc in documents if len(doc.sentences) > 1]
    return {
        "span against span": spans,
        "span against the whole document": against_whole.assign(**{TEXT: against_whole[DOCNO_OF].map(whole)}),
        "ICT (two sentences or more)": ict_examples(several, window=1, remove=1.0, seed=1001),
    }


def own_rank(encoder: BiEncoder, rows: pd.DataFrame) -> tuple[float, float]:
    """Mean reciprocal rank of each row's own text among all rows' texts, and the share ranked first."""
    scores = encoder.embed(rows[QUERY].tolist()) @ encoder.embed(rows[TEXT].tolist()).T
    ranks = (scores > np.diag(scores)[:, None]).sum(axis=1) + 1
    return float(np.mean(1.0 / ranks)), float(np.mean(ranks == 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="the collection the models were adapted on")
    parser.add_argument("--sample-documents", type=int, required=True, help="as given to evirank adapt")
    parser.add_argument("--seed", type=int, default=42, help="as given to evirank adapt (default 42)")
    parser.add_argument("--crop-words", type=int, nargs=2, default=(8, 48), metavar=("MIN", "MAX"))
    parser.add_argument("--held-out", type=int, default=1000, help="documents to check on (default 1000)")
    parser.add_argument(
        "--model", action="append", required=True, help=f"a model folder, or {ZERO_SHOT} (repeat)"
    )
    args = parser.parse_args()

    documents = split_documents(read_corpus(args.corpus, empty="skip"))
    trained_on = min(args.sample_documents, len(documents))
    unseen = held_out(documents, args.sample_documents, args.seed, args.held_out)
    if not unseen:
        parser.error(f"--sample-documents {args.sample_documents} leaves no document of {args.corpus} unseen")
    checks = tasks(unseen, tuple(args.crop_words))
    rows = []
    for model in args.model:
        encoder = BiEncoder(None if model == ZERO_SHOT else model)
        for task, frame in checks.items():
            if len(frame) < 2:
                rows.append([model, task, len(frame), "", ""])
                continue
            mrr, first = own_rank(encoder, frame)
            rows.append([model, task, len(frame), f"{mrr:.4f}", f"{first:.4f}"])
    print(
        header(
            "Adapted bi-encoders on their training task, documents held out of training",
            f"{args.corpus}: {len(documents)} documents, {len(documents) - trained_on} not drawn for"
            f" training, {len(unseen)} of them checked",
        )
    )
    print(markdown.table(["model", "task", "documents", "MRR of its own text", "ranked first"], rows))
    print(footer())


if __name__ == "__main__":
    main()
