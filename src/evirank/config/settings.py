"""Every setting of evirank, once: :data:`SETTINGS`.

Each entry is a :class:`~evirank.config.table.Setting` (name, default, help, group, kind, flag
spelling, choices). The commands add their flags from here (:meth:`SettingsTable.add_flags`), the
pipeline spec and the service read defaults and checks from here, and a command that needs another
default says so where it adds the flag (``defaults={"depth": None}``). Specs in evirank's own
grammar (``--segment``, ``--aggregate``, ``--scorer``) are checked as text here and parsed by the
pipeline spec, which knows the registries.

Adding a setting is adding an entry here, then naming it where a command adds its flags and
reading it where it is used: ``docs/architecture.md`` walks through one.

Example:
    >>> SETTINGS["bm25"].flag, SETTINGS["bm25"].nargs, SETTINGS.check("depth", "20")
    ('--bm25', 2, 20)
    >>> SETTINGS["normalise"].aliases
    ('--normalize',)
"""

from __future__ import annotations

from evirank.config import values
from evirank.config.table import Setting, SettingsTable

#: Where the documents come from.
DOCUMENTS = "documents"
#: Queries and topics.
QUERIES = "queries"
#: The first stage.
FIRST_STAGE = "first stage"
#: Scorers and where models run.
SCORING = "scoring"
#: The cascade.
CASCADE = "cascade"
#: Segmentation and aggregation.
PASSAGES = "passages and aggregation"
#: The pairwise stage.
PAIRWISE = "pairwise re-ranking"
#: What a ranking shows.
SHOWN = "results shown"
#: Files written.
OUTPUTS = "outputs"
#: Ray.
RAY = "scale-out (Ray)"
#: The HTTP service.
SERVICE = "service"
#: Evaluation and significance.
EVALUATION = "evaluation"
#: Cross-validated tuning.
TUNING = "tuning"
#: Training data.
TRAINING_DATA = "training data (repeatable; all are concatenated)"
#: Validation data.
VALIDATION_DATA = "validation data (default: split by query)"
#: Building training examples.
EXAMPLES = "example builders"
#: Optimisation.
OPTIMISATION = "optimisation (defaults from the papers)"
#: Training recipes.
RECIPE = "training recipe"
#: Searching recipes.
SWEEP = "recipe search"
#: Distillation.
DISTILLATION = "distillation"
#: Adapting a model to a collection from its text alone.
ADAPTATION = "adaptation (from the corpus text alone)"
#: Looking inside a model.
ATTENTION = "attention"
#: Reports.
REPORT = "report"
#: Other options of one command.
OPTIONS = "options"

#: The engines a scorer can run on (each family says which of them it supports).
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-int8")
#: How a batch is laid out for the model (:mod:`evirank.score.unpadded`).
BATCH_LAYOUTS = ("auto", "padded", "unpadded")
#: The precisions a model can compute in.
DTYPES = ("auto", "fp32", "bf16", "fp16")
#: The corpus formats (:data:`evirank.io.corpus.CORPUS_FORMATS`; a test keeps the two equal, so
#: that ``--help`` imports no reader).
CORPUS_FORMATS = ("jsonl", "beir", "trec", "nyt", "wapo", "warc", "msmarco-docs")
#: How pair probabilities of a pairwise stage become document scores.
DUO_AGGREGATES = ("sum", "binary", "min", "max", "sym-sum")
#: The segmenter grammar, for help texts (:mod:`evirank.segment.segment_spec` parses it).
SEGMENT_GRAMMAR = (
    "sentences[:segment|prepend|skip], windows[:LENGTH[:STRIDE]][:prepend|skip] or whole[:prepend|skip]"
)
#: The aggregator grammar, for help texts (:mod:`evirank.aggregate.registry` parses it; a test keeps
#: the two equal).
AGGREGATE_GRAMMAR = "birch[:N] (birch is birch:3), maxp, firstp, sump, meanp, document"

#: The segmenter when none is given and no stored passage vectors choose one.
_SEGMENT = "sentences:prepend"

SETTINGS = SettingsTable(
    [
        # -- documents -------------------------------------------------------------------------
        Setting(
            "index",
            None,
            "a Lucene index with stored documents (evirank index)",
            DOCUMENTS,
            metavar="DIR",
            exclusive="source",
        ),
        Setting(
            "corpus",
            None,
            "a corpus instead of an index: a BEIR folder, a JSONL file ({_id,title,text} or {id,contents}), "
            "or a collection as distributed, one file or a folder (see --corpus-format)",
            DOCUMENTS,
            metavar="PATH",
            exclusive="source",
        ),
        Setting(
            "corpus_format",
            None,
            f"the corpus format: {', '.join(CORPUS_FORMATS)} (default: told from the files; the papers' "
            "collections: trec for TREC disks, nyt, wapo, warc for ClueWeb, msmarco-docs)",
            DOCUMENTS,
            choices=CORPUS_FORMATS,
            metavar="FMT",
        ),
        Setting(
            "missing_docs",
            "error",
            "candidates absent from the index or corpus: stop (error), or keep them with empty text",
            DOCUMENTS,
            choices=("error", "keep"),
        ),
        Setting(
            "docs",
            None,
            "a JSONL file of documents (plain or .gz: id, title, text and any metadata), or - for stdin",
            DOCUMENTS,
            metavar="FILE",
        ),
        Setting(
            "first_stage_key",
            None,
            "the key of each document's first-stage score in --docs (BM25's, say), interpolated by --alpha "
            "as rerank interpolates its first stage (default: none, the passages' evidence alone)",
            DOCUMENTS,
            metavar="KEY",
        ),
        Setting(
            "name",
            None,
            "the collection's name, shown by the search page (default: the corpus folder's or file's name)",
            DOCUMENTS,
        ),
        Setting(
            "empty_documents",
            "skip",
            "a document with neither title nor text is skipped with a warning naming its line (as "
            "Anserini does: it can never be retrieved) or stops the indexing",
            DOCUMENTS,
            choices=("skip", "error"),
        ),
        Setting(
            "block_size",
            None,
            "documents per resumable block of passage vectors (default: 1000)",
            DOCUMENTS,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "embed",
            False,
            "also embed every passage with a bi-encoder into DIR/vectors (see evirank embed)",
            DOCUMENTS,
            action="store_true",
        ),
        # -- queries ---------------------------------------------------------------------------
        Setting("query", None, "the query text", QUERIES, kind=values.query_text),
        Setting("topics", None, "topics file, BEIR folder, or irds:<id>", QUERIES, metavar="T"),
        Setting(
            "field",
            "title",
            "TREC topic field: title, description, narrative, the query variants description-keywords, "
            "narrative-keywords and narrative-positive, or several joined by + (title+description)",
            QUERIES,
        ),
        Setting(
            "split",
            None,
            "for a BEIR folder: keep the queries judged in qrels/SPLIT.tsv (without it: every query of "
            "queries.jsonl, and the log says how many)",
            QUERIES,
        ),
        # -- first stage -----------------------------------------------------------------------
        Setting(
            "run",
            None,
            "a first-stage TREC run to re-rank (instead of searching --index)",
            FIRST_STAGE,
            metavar="RUN",
        ),
        Setting(
            "first_stage",
            "bm25",
            "bm25, dense (the index's passage vectors), or both fused: rrf[:K] (reciprocal rank fusion, K "
            "60) or interp[:WEIGHT] (per-query min-max interpolation, WEIGHT on BM25, 0.5)",
            FIRST_STAGE,
            kind=values.non_empty_text,
            metavar="SPEC",
            api=True,
        ),
        Setting(
            "k",
            1000,
            "first-stage depth: documents retrieved per query",
            FIRST_STAGE,
            kind=values.positive_int,
            metavar="K",
            api=True,
        ),
        Setting(
            "bm25",
            (0.9, 0.4),
            "BM25 parameters k1 and b, Anserini's",
            FIRST_STAGE,
            kind=values.finite_float,
            metavar=("K1", "B"),
            nargs=2,
        ),
        Setting(
            "rm3",
            None,
            "expand BM25's queries with RM3: no value for Anserini's defaults (10 10 0.5), or all three",
            FIRST_STAGE,
            metavar="FB_DOCS FB_TERMS ORIG_WEIGHT",
            nargs="*",
        ),
        Setting(
            "threads", 1, "search (and indexing) threads", FIRST_STAGE, kind=values.positive_int, metavar="N"
        ),
        Setting(
            "save_fusion",
            None,
            "with a fused first stage: both lists' scores per document (Parquet), for evirank tune "
            "--passages",
            OUTPUTS,
            metavar="FILE",
        ),
        # -- scoring ---------------------------------------------------------------------------
        Setting(
            "scorer",
            None,
            "the model family (auto: told from --model's files; without --model the offline "
            "all-MiniLM-L6-v2 bi-encoder; or one of {families}), or a scorer spec [LABEL=]FAMILY[:MODEL]; "
            "repeat it for several scorers' evidence in one ranking (default: auto)",
            SCORING,
            kind=values.non_empty_text,
            metavar="SCORER",
            action="append",
        ),
        Setting(
            "model",
            None,
            "the model of the one scorer: a Hugging Face id or a local folder (with several --scorer, give "
            "each its model in its spec)",
            SCORING,
            kind=values.non_empty_text,
            metavar="M",
        ),
        Setting(
            "scorer_weights",
            None,
            "weights of the scorers after the first (the first gets 1 minus their sum; default: equal "
            "shares), e.g. bi=0.3",
            SCORING,
            metavar="LABEL=W",
            nargs="+",
        ),
        Setting(
            "device",
            "auto",
            "auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps",
            SCORING,
            kind=values.non_empty_text,
        ),
        Setting(
            "backend",
            "torch",
            "engine: torch (CPU or GPU), onnx (ONNX Runtime on CPU, fp32), onnx-int8 (ONNX Runtime, int8 "
            "weights), openvino (OpenVINO on CPU: fp32, or bf16 where the CPU has it), openvino-int8 "
            "(OpenVINO, static int8; the openvino extra); each family says which it runs on",
            SCORING,
            choices=BACKENDS,
        ),
        Setting(
            "dtype",
            "auto",
            "precision the models compute in: auto (bf16 on GPUs, fp32 on CPUs), fp32, bf16 (GPUs; CPUs "
            "with AMX or AVX512_BF16), fp16 (GPUs)",
            SCORING,
            choices=DTYPES,
        ),
        Setting(
            "batch_tokens",
            None,
            "token budget per batch (default: by device; on CUDA also by model width)",
            SCORING,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "max_length",
            None,
            "input token cap (default: the model's)",
            SCORING,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "model_threads",
            None,
            "CPU threads of one model call (default: the engine's own choice; in serve, 1 when only queries "
            "are embedded, from stored vectors: a few tokens gain nothing from more, and spinning threads "
            "slow every other request)",
            SCORING,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "batch_layout",
            "auto",
            "how a batch reaches the model: padded (rows x longest length), unpadded (the real tokens only, "
            "attention within each sequence: BERT, ELECTRA, RoBERTa and XLM-R encoders on the torch "
            "backend), or auto (where the model supports it: unpadded on CUDA, and on a CPU for the batches "
            "that are 5 percent padding or more, such as a short request's; else padded); scores agree "
            "within float rounding, so both share the score store",
            SCORING,
            choices=BATCH_LAYOUTS,
        ),
        Setting(
            "commit_every",
            4,
            "write new scores to the score store every N model batches (an interrupted run loses at "
            "most these)",
            SCORING,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "vectors",
            None,
            "stored passage vectors (evirank embed) read by a scorer that stores passages (a bi-encoder: "
            "only queries are embedded), --prune-by or a dense first stage; default: the index's own when it "
            "has some; none: compute every passage now",
            SCORING,
            metavar="VDIR",
        ),
        Setting(
            "scores",
            None,
            "score store: a .sqlite file, or a folder or URL (s3://, gs://) of Parquet shards; scores are "
            "reused and added as they are computed (scores read from stored vectors are not kept)",
            SCORING,
            metavar="STORE",
        ),
        # -- cascade ---------------------------------------------------------------------------
        Setting(
            "prune",
            None,
            "a cheap scorer keeps each document's N best passages; only those are scored and aggregated "
            "(birch:n needs n <= N)",
            CASCADE,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "prune_by",
            "bm25",
            "the cheap scorer of --prune: bm25 over each document's passages, or a scorer FAMILY[:MODEL] "
            "such as bi (by lookup in the stored vectors when there are some)",
            CASCADE,
            kind=values.non_empty_text,
            metavar="SCORER",
        ),
        # -- passages and aggregation ----------------------------------------------------------
        Setting(
            "segment",
            None,
            f"{SEGMENT_GRAMMAR} (default: the stored passage vectors' segmenter when the pipeline reads "
            f"some, else {_SEGMENT})",
            PASSAGES,
            kind=values.non_empty_text,
            metavar="SPEC",
        ),
        Setting(
            "default_segment",
            _SEGMENT,
            "the segmenter when --segment is not given and no stored passage vectors choose one",
            PASSAGES,
            kind=values.non_empty_text,
            cli=False,
        ),
        Setting(
            "max_passages",
            1000,
            "segments kept per document, its first ones, with a warning naming a longer document (0: no "
            "limit)",
            PASSAGES,
            kind=values.non_negative_int,
            metavar="N",
        ),
        Setting("aggregate", "maxp", AGGREGATE_GRAMMAR, PASSAGES, kind=values.non_empty_text),
        Setting(
            "alpha",
            0.2,
            "first-stage weight in [0, 1]: a document scores alpha x its first-stage score + (1 - alpha) "
            "x its passages' evidence, both min-max normalised per query (0: the evidence alone; without "
            "a first stage, as in rank, the evidence alone)",
            PASSAGES,
            kind=values.unit_float,
            metavar="A",
        ),
        Setting(
            "weights",
            None,
            "Birch's weights of the top-n passages (default: 1 0.5 0.25)",
            PASSAGES,
            kind=values.finite_float,
            metavar="W",
            nargs="+",
        ),
        Setting(
            "normalise",
            None,
            "minmax: per-query min-max of first-stage and passage scores (default), or none (raw)",
            PASSAGES,
            choices=("none", "minmax"),
            aliases=("--normalize",),
        ),
        Setting(
            "depth",
            100,
            "documents re-ranked per query; the rest keep their first-stage order",
            PASSAGES,
            kind=values.positive_int,
            api=True,
        ),
        # -- pairwise re-ranking ---------------------------------------------------------------
        Setting(
            "duo",
            None,
            "after aggregation, re-rank each query's top K documents (their best passages) with a pairwise "
            "model (--duo-model): K(K-1) model calls per query, pair scores kept in the store",
            PAIRWISE,
            kind=values.positive_int,
            metavar="K",
        ),
        Setting(
            "duo_model",
            None,
            "the pairwise model of --duo (e.g. a duoT5 folder; the family is told from the model)",
            PAIRWISE,
            kind=values.non_empty_text,
            metavar="[FAMILY:]MODEL",
        ),
        Setting(
            "duo_aggregate",
            "sym-sum",
            "how --duo turns pair probabilities p_ij into document scores: sum, binary (p_ij > 0.5 counted), "
            "min or max over j (duoBERT), or sym-sum, the sum of p_ij + 1 - p_ji (duoT5)",
            PAIRWISE,
            choices=DUO_AGGREGATES,
        ),
        # -- results shown ---------------------------------------------------------------------
        Setting("top", 10, "results shown", SHOWN, kind=values.non_negative_int, metavar="N", api=True),
        Setting(
            "show_passages",
            3,
            "evidence passages shown per result",
            SHOWN,
            kind=values.non_negative_int,
            metavar="N",
        ),
        Setting("json", False, "one JSON object per result instead of a table", SHOWN, action="store_true"),
        # -- outputs ---------------------------------------------------------------------------
        Setting("output", None, "where to write", OUTPUTS, metavar="PATH", aliases=("-o",)),
        Setting("overwrite", False, "replace existing outputs", OUTPUTS, action="store_true"),
        Setting("tag", None, "the run tag", OUTPUTS),
        Setting("no_scores", False, "keep no score store (nothing resumes)", OUTPUTS, action="store_true"),
        Setting(
            "save_passages",
            None,
            "Parquet of the scored passages (for evirank tune --passages)",
            OUTPUTS,
            metavar="FILE",
        ),
        # -- Ray -------------------------------------------------------------------------------
        Setting(
            "ray",
            None,
            "run the model on Ray: local (default: a Ray instance on this machine), auto (the cluster this "
            "machine joined with `ray start`), or a cluster address HOST:PORT",
            RAY,
            kind=values.non_empty_text,
            metavar="ADDRESS",
            nargs="?",
            const="local",
        ),
        Setting(
            "ray_workers",
            None,
            "model replicas (default: one per GPU with --ray-gpus, else one per --ray-cpus cores)",
            RAY,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "ray_cpus",
            None,
            "cores Ray reserves per replica (default: the model's threads, --model-threads or the engine's "
            "default; 1 with GPUs); a replica runs the model with those threads whatever is reserved, so "
            "the run is the same with and without --ray",
            RAY,
            kind=values.positive_float,
            metavar="C",
        ),
        Setting(
            "ray_gpus", 0.0, "GPUs per replica (1 on GPUs)", RAY, kind=values.non_negative_float, metavar="G"
        ),
        Setting(
            "query_block",
            None,
            "re-rank N queries at a time, so only one block's texts are in memory (default: all at once); "
            "with the same N and threads the run is the same with and without --ray",
            RAY,
            kind=values.positive_int,
            metavar="N",
        ),
        # -- service ---------------------------------------------------------------------------
        Setting("max_depth", 100, "largest depth a request may ask", SERVICE, kind=values.positive_int),
        Setting("host", "127.0.0.1", "interface to listen on", SERVICE, kind=values.non_empty_text),
        Setting("port", 8080, "port (0: any free port)", SERVICE, kind=values.port),
        Setting(
            "timeout",
            30.0,
            "seconds before a search gets 503",
            SERVICE,
            kind=values.positive_float,
            metavar="S",
        ),
        Setting("workers", 4, "searches running at once", SERVICE, kind=values.positive_int),
        Setting(
            "max_pending",
            64,
            "searches admitted at once; more get 503",
            SERVICE,
            kind=values.positive_int,
        ),
        Setting(
            "batch",
            32,
            "with stored vectors (bi-encoder): the most queries of concurrent requests embedded in one "
            "model call (each answer is bitwise the one it gets alone)",
            SERVICE,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "no_warmup", False, "do not run a first search before listening", SERVICE, action="store_true"
        ),
        Setting(
            "max_documents",
            1000,
            "the most documents one rerank request may send (more: 413)",
            SERVICE,
            kind=values.positive_int,
        ),
        Setting(
            "max_document_chars",
            100_000,
            "the most characters of one document in a rerank request (more: 413)",
            SERVICE,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "max_request_tokens",
            250_000,
            "the most tokens of one rerank request, the query counted once per document (more: 413)",
            SERVICE,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting(
            "api_key_file",
            None,
            "a file holding the API key every request must send (Authorization: Bearer KEY; else 401); "
            "/health and /ready stay open",
            SERVICE,
            kind=values.non_empty_text,
            metavar="FILE",
        ),
        Setting(
            "cors_origins",
            None,
            "origins whose web pages may call the service from a browser (CORS; default: none)",
            SERVICE,
            kind=values.non_empty_text,
            metavar="ORIGIN",
            nargs="+",
        ),
        Setting(
            "replicas",
            1,
            "with --ray: copies of the service, each with its own model (one per CPU group or GPU)",
            SERVICE,
            kind=values.positive_int,
        ),
        # -- evaluation ------------------------------------------------------------------------
        Setting("qrels", None, "TREC qrels or BEIR qrels TSV", EVALUATION, metavar="Q"),
        Setting(
            "measures",
            ("AP", "P@20", "nDCG@20", "nDCG@10", "RR@10", "R@1000"),
            "measures (ir_measures names)",
            EVALUATION,
            metavar="M",
            nargs="+",
            aliases=("--metrics",),
        ),
        Setting("per_query", False, "also report each query's values", EVALUATION, action="store_true"),
        Setting(
            "baseline",
            None,
            "test every run against this one: a run's name or path, or another PATH / NAME=PATH",
            EVALUATION,
            metavar="R",
        ),
        Setting(
            "relevance_level",
            None,
            "minimum label counted relevant by binary measures, like trec_eval -l (default: 1)",
            EVALUATION,
            kind=values.non_negative_int,
            metavar="N",
        ),
        Setting(
            "missing",
            "skip",
            "qrels queries missing from a run: skip (trec_eval's default) or zero (trec_eval -c)",
            EVALUATION,
            choices=("skip", "zero"),
        ),
        Setting(
            "correction",
            "bonferroni",
            "multiple-comparison correction",
            EVALUATION,
            choices=("bonferroni", "holm", "none"),
        ),
        Setting(
            "family",
            "all",
            "what the correction counts: all runs x measures, or runs within each measure",
            EVALUATION,
            choices=("all", "measure"),
        ),
        Setting(
            "significance",
            0.05,
            "significance level: a difference is significant when its adjusted p <= LEVEL",
            EVALUATION,
            kind=values.open_unit_float,
            metavar="LEVEL",
        ),
        Setting(
            "ties",
            "trec_eval",
            "order of tied scores: trec_eval's (docno descending) or the run's own rank column",
            EVALUATION,
            choices=("trec_eval", "rank"),
        ),
        Setting("digits", 4, "decimals in Markdown tables", EVALUATION, kind=values.non_negative_int),
        Setting(
            "format",
            None,
            "output format",
            OUTPUTS,
            choices=("table", "tsv", "jsonl", "markdown", "json"),
        ),
        # -- tuning ----------------------------------------------------------------------------
        Setting(
            "fingerprint",
            None,
            "which scorer's scores, when the store holds several (a prefix is enough)",
            TUNING,
            metavar="PREFIX",
        ),
        Setting("passages", None, "a file of scored passages instead of a store", TUNING, metavar="FILE"),
        Setting(
            "scorer_scores",
            None,
            "one scorer's passage scores, repeated for several scorers: LABEL=STORE[#FINGERPRINT] or "
            "LABEL=FILE (instead of --scores/--passages)",
            TUNING,
            metavar="LABEL=SOURCE",
            action="append",
        ),
        Setting("folds", None, "Robust04 JSON folds or qid<TAB>fold TSV", TUNING, metavar="FILE"),
        Setting(
            "tune_on",
            ("train", "dev"),
            "JSON folds: the lists that tune a fold",
            TUNING,
            choices=("train", "dev"),
            nargs="+",
        ),
        Setting("k_folds", 5, "random folds", TUNING, kind=values.positive_int, metavar="K"),
        Setting("seed", 0, "the random seed", TUNING, kind=values.non_negative_int),
        Setting("metric", "AP", "the measure maximised", TUNING),
        Setting(
            "grid",
            None,
            "the settings searched, e.g. alpha=0:1:0.1 w2=0:1:0.1 w3=0:1:0.1",
            TUNING,
            metavar="AXIS",
            nargs="+",
        ),
        # -- explain and the attention view ----------------------------------------------------
        Setting("qid", None, "the query id", QUERIES),
        Setting("docno", None, "the document id", DOCUMENTS),
        Setting(
            "no_matches",
            False,
            "do not show each passage's matched words (shown for scorers that tell them, such as late "
            "interaction; they load the model)",
            SHOWN,
            action="store_true",
        ),
        Setting(
            "attention",
            None,
            "draw the attention from each query token to the passage's tokens at these layers (0-based; -1 "
            "is the last; none given: the last), mean over heads; needs --attention-output. A bi-encoder or "
            "ColBERT has no cross attention: their view is of the score itself (docs/attention.md)",
            ATTENTION,
            kind=values.integer,
            metavar="LAYER",
            nargs="*",
        ),
        Setting(
            "attention_output",
            None,
            "write PREFIX.png (the heat map) and PREFIX.html (the heat map and the passage shaded per query "
            "word, words and tokens)",
            ATTENTION,
            metavar="PREFIX",
        ),
        Setting(
            "pid",
            None,
            "the passage to look inside (default: the best)",
            ATTENTION,
            kind=values.non_negative_int,
        ),
        Setting(
            "attention_model",
            None,
            "look inside this model instead of the one that made the scores (a scorer spec: cross:DIR, "
            "seq2seq:DIR, bi, ...), for the same passage",
            ATTENTION,
            metavar="[FAMILY:]MODEL",
        ),
        Setting(
            "heads",
            False,
            "also draw every attention head, not only their mean",
            ATTENTION,
            action="store_true",
        ),
        Setting(
            "attention_level",
            "word",
            "the PNG's units: words (word pieces merged) or tokens; the HTML has both",
            ATTENTION,
            choices=("word", "token"),
        ),
        # -- reports ---------------------------------------------------------------------------
        Setting(
            "plot_measures",
            None,
            "measures plotted per query (default: the first)",
            REPORT,
            metavar="M",
            nargs="+",
        ),
        Setting(
            "length_buckets",
            None,
            "e.g. 1,2,3,4+ or 1-5,6-10,11+ (default: automatic)",
            REPORT,
            metavar="SPEC",
        ),
        Setting(
            "length_measure", None, "the measure by query length (default: the first)", REPORT, metavar="M"
        ),
        Setting(
            "pruned",
            None,
            "re-tune this tune folder on passages without query terms; repeat",
            REPORT,
            metavar="NAME=DIR",
            action="append",
        ),
        Setting(
            "exact_terms",
            False,
            "pruning matches exact tokens (default: plurals folded)",
            REPORT,
            action="store_true",
        ),
        Setting(
            "training",
            None,
            "a model folder of evirank train, distill or adapt: its steps and loss curve; repeat",
            REPORT,
            metavar="NAME=DIR",
            action="append",
        ),
        Setting(
            "loss_window",
            None,
            "the loss curves' moving mean, in steps (default: a fiftieth of each run)",
            REPORT,
            kind=values.positive_int,
            metavar="N",
        ),
        Setting("no_plots", False, "tables only (no matplotlib needed)", REPORT, action="store_true"),
        Setting("title", "evirank report", "the report's title", REPORT),
        # -- training: data --------------------------------------------------------------------
        *(
            Setting(
                f"{prefix}{name}",
                None,
                f"{'validation: ' if prefix else ''}{text}",
                VALIDATION_DATA if prefix else TRAINING_DATA,
                metavar=metavar,
                nargs=len(metavar) if isinstance(metavar, tuple) else None,
                action="append",
            )
            for prefix in ("", "val_")
            for name, metavar, text in (
                (
                    "short_texts",
                    ("TOPICS", "QRELS", "RUN", "CORPUS"),
                    "judged candidates of a run over short texts (graded labels collapsed to binary)",
                ),
                (
                    "documents",
                    ("TOPICS", "QRELS", "RUN", "CORPUS"),
                    "documents with document-level qrels: passages of relevant documents are relevant",
                ),
                (
                    "evidence",
                    ("TOPICS", "EVIDENCE", "QRELS", "RUN", "CORPUS"),
                    "sentence-level gold (JSONL query-id, corpus-id, evidence); negatives from the run",
                ),
                ("pairs", "FILE", "a pair file: TSV query<TAB>text<TAB>label, or JSONL examples"),
            )
        ),
        Setting(
            "validation_fraction",
            0.25,
            "without --val-* data: share of training queries held out (0: no validation)",
            VALIDATION_DATA,
            kind=values.unit_float,
        ),
        # -- training: example builders --------------------------------------------------------
        Setting(
            "unjudged",
            "skip",
            "short texts: unjudged candidates skipped (Birch trained on judged tweets) or used as negatives",
            EXAMPLES,
            choices=("skip", "negative"),
        ),
        Setting(
            "val_depth",
            None,
            "validation short texts: candidates ranked at most this deep",
            EXAMPLES,
            kind=values.positive_int,
        ),
        Setting(
            "passage_words",
            0,
            "documents: passages of this many words (0: the whole document; Dai & Callan: 150)",
            EXAMPLES,
            kind=values.non_negative_int,
        ),
        Setting(
            "passage_stride",
            75,
            "documents: words between passage starts",
            EXAMPLES,
            kind=values.positive_int,
        ),
        Setting(
            "negative_depth",
            100,
            "documents/evidence: negatives from the run's top this many documents",
            EXAMPLES,
            kind=values.positive_int,
        ),
        Setting(
            "negatives_per_query",
            10,
            "documents/evidence: negative documents per query (0: all within the depth)",
            EXAMPLES,
            kind=values.non_negative_int,
        ),
        Setting(
            "hard_negatives",
            None,
            "documents/evidence: mine the negatives from this ranking instead of the data flags' RUN: "
            "run:FILE (any TREC run, e.g. a first-round cross-encoder's) or vectors:PATH (the bi-encoder's "
            "ranking over an index's stored passage vectors); judged-relevant documents and gold evidence "
            "are never negatives; validation keeps the data flags' runs",
            EXAMPLES,
            metavar="SOURCE",
        ),
        Setting(
            "negative_skip",
            0,
            "with --hard-negatives: leave out the top N ranks (likely unjudged positives)",
            EXAMPLES,
            kind=values.non_negative_int,
            metavar="N",
        ),
        Setting(
            "negative_pick",
            "top",
            "with --hard-negatives: the best-ranked --negatives-per-query documents of the window, or a "
            "seeded random sample of it",
            EXAMPLES,
            choices=("top", "random"),
        ),
        Setting("no_title", False, "documents: do not prepend the title", EXAMPLES, action="store_true"),
        Setting(
            "evidence_title",
            False,
            "evidence: prepend the document title to each sentence",
            EXAMPLES,
            action="store_true",
        ),
        Setting(
            "evidence_gold_only",
            False,
            "evidence: the relevant documents' other sentences are not negatives (only other documents' "
            "sentences are): for models that rank documents by their best sentences",
            EXAMPLES,
            action="store_true",
        ),
        Setting(
            "relevant_grade",
            1,
            "the lowest grade counted as relevant",
            EXAMPLES,
            kind=values.non_negative_int,
        ),
        Setting(
            "examples_out",
            None,
            "also write the training examples as JSONL (inspect them, or reuse with --pairs)",
            EXAMPLES,
            metavar="FILE",
        ),
        # -- training: the recipe --------------------------------------------------------------
        Setting(
            "init",
            None,
            "continue from an earlier relevance model, its head included (sequential transfer)",
            RECIPE,
            metavar="CHECKPOINT",
        ),
        Setting(
            "num_labels",
            1,
            "1: one logit with BCE; 2: two classes with cross-entropy (same objective)",
            RECIPE,
            kind=values.positive_int,
            choices=(1, 2),
        ),
        Setting(
            "loss",
            None,
            "pointwise: each pair classified alone (the papers; the cross-encoder's and PARADE's default); "
            "listwise: each positive against --group-size - 1 negatives of its query, softmax cross-entropy "
            "(Gao, Dai & Callan 2021); contrastive: the bi-encoder's (its only one); pairwise: duo's (its "
            "only one)",
            RECIPE,
        ),
        Setting(
            "group_size",
            8,
            "listwise and contrastive: texts per query in a group (one positive, the rest its negatives)",
            RECIPE,
            kind=values.positive_int,
        ),
        Setting(
            "hardest_negatives",
            None,
            "contrastive: keep only each positive's K negatives the initial bi-encoder scores highest "
            "(default: draw from all)",
            RECIPE,
            kind=values.positive_int,
            metavar="K",
        ),
        Setting(
            "scale",
            20.0,
            "contrastive: the cosines' multiplier in the softmax (1 / temperature)",
            RECIPE,
            kind=values.positive_float,
        ),
        Setting(
            "negatives_from",
            "query",
            "listwise: a positive's negatives are any of its query's (query), or only those its own builder "
            "made (source: gold sentences against sentences, relevant abstracts against abstracts)",
            RECIPE,
            choices=("query", "source"),
        ),
        Setting(
            "aggregation",
            None,
            "parade: how the passages' [CLS] vectors become the document's (PARADE-Avg, -Max, -Attn, "
            "-Transformer; default transformer)",
            RECIPE,
            choices=("avg", "max", "attn", "transformer"),
        ),
        Setting(
            "passages_per_document",
            None,
            "parade: passages read per document, its first ones (default 16; --max-passages cuts the "
            "examples first)",
            RECIPE,
            kind=values.positive_int,
            metavar="N",
        ),
        # -- training: optimisation ------------------------------------------------------------
        Setting("epochs", 1, "passes over the training examples", OPTIMISATION, kind=values.positive_int),
        Setting(
            "batch_size",
            16,
            "examples per forward pass (--loss listwise: groups, each --group-size pairs)",
            OPTIMISATION,
            kind=values.positive_int,
        ),
        Setting(
            "gradient_accumulation",
            1,
            "forward passes per optimizer step",
            OPTIMISATION,
            kind=values.positive_int,
            flag="--grad-accum",
        ),
        Setting(
            "learning_rate",
            3e-5,
            "AdamW's peak learning rate",
            OPTIMISATION,
            kind=values.positive_float,
            flag="--lr",
        ),
        Setting(
            "head_learning_rate",
            None,
            "the peak learning rate of a family's new head (PARADE's aggregation network; default: --lr)",
            OPTIMISATION,
            kind=values.positive_float,
            flag="--head-lr",
        ),
        Setting("weight_decay", 0.01, "AdamW's weight decay", OPTIMISATION, kind=values.non_negative_float),
        Setting(
            "warmup_fraction",
            0.1,
            "share of steps with linear warmup (then linear decay)",
            OPTIMISATION,
            kind=values.unit_float,
            flag="--warmup",
        ),
        Setting("dropout", 0.1, "dropout of the encoder and the head", OPTIMISATION, kind=values.unit_float),
        Setting(
            "max_steps", None, "stop after this many optimizer steps", OPTIMISATION, kind=values.positive_int
        ),
        Setting("no_bf16", False, "no bf16 autocast on GPU", OPTIMISATION, action="store_true"),
        Setting("eval_batch_size", 64, "pairs per validation batch", OPTIMISATION, kind=values.positive_int),
        Setting(
            "validate_every_steps",
            None,
            "also validate every this many steps (default: each epoch's end)",
            OPTIMISATION,
            kind=values.positive_int,
            flag="--validate-every",
        ),
        Setting(
            "patience",
            None,
            "early stopping: validations without improvement (default: never)",
            OPTIMISATION,
            kind=values.positive_int,
        ),
        Setting(
            "save_every_steps",
            500,
            "steps between resumable checkpoints",
            OPTIMISATION,
            kind=values.positive_int,
            flag="--save-every",
        ),
        Setting(
            "keep_checkpoints",
            False,
            "keep the resumable checkpoint at the end",
            OPTIMISATION,
            action="store_true",
        ),
        Setting(
            "resume",
            False,
            "continue an interrupted run in the output folder",
            OPTIMISATION,
            action="store_true",
        ),
        # -- training: recipe search -----------------------------------------------------------
        Setting(
            "sweep_lr", None, "learning rates", SWEEP, kind=values.positive_float, metavar="LR", nargs="+"
        ),
        Setting("sweep_epochs", None, "epochs", SWEEP, kind=values.positive_int, metavar="N", nargs="+"),
        Setting(
            "sweep_group",
            None,
            "listwise group sizes",
            SWEEP,
            kind=values.positive_int,
            metavar="N",
            nargs="+",
        ),
        Setting("sweep_batch", None, "batch sizes", SWEEP, kind=values.positive_int, metavar="N", nargs="+"),
        Setting(
            "sweep_negatives",
            None,
            "negatives sources: given (the data flags' runs) or a --hard-negatives source",
            SWEEP,
            metavar="SOURCE",
            nargs="+",
        ),
        # -- adaptation ------------------------------------------------------------------------
        Setting(
            "method",
            "crop",
            "crop: two random spans of one document as a pair; tsdae: the bi-encoder learns to rebuild "
            "each sentence from the embedding of a copy with most words deleted",
            ADAPTATION,
            choices=("crop", "tsdae"),
        ),
        Setting(
            "queries_per_document",
            1,
            "pseudo-queries drawn per document",
            ADAPTATION,
            kind=values.positive_int,
        ),
        Setting(
            "crop_words",
            (8, 48),
            "crop: the shortest and longest span, in words",
            ADAPTATION,
            kind=values.positive_int,
            nargs=2,
            metavar=("MIN", "MAX"),
        ),
        Setting(
            "pseudo_negatives",
            4,
            "BM25 negatives per pseudo-query: other documents' texts drawn from its top --negative-depth",
            ADAPTATION,
            kind=values.positive_int,
        ),
        Setting(
            "sample_documents",
            None,
            "adapt on this many documents drawn at random (seeded) rather than all",
            ADAPTATION,
            kind=values.positive_int,
            metavar="N",
        ),
        # -- distillation ----------------------------------------------------------------------
        Setting("teacher", None, "the teacher relevance model (folder or Hub id)", DISTILLATION),
        Setting(
            "num_layers",
            None,
            "keep the teacher's first N layers (default: half of them)",
            DISTILLATION,
            kind=values.positive_int,
            exclusive="layers",
        ),
        Setting(
            "layers",
            None,
            "teacher layers to keep, e.g. 0 2 4, or a range 0-2",
            DISTILLATION,
            metavar="L",
            nargs="+",
            exclusive="layers",
        ),
        Setting(
            "pairs_per_positive",
            4,
            "margin-mse: negatives per positive",
            DISTILLATION,
            kind=values.positive_int,
        ),
        Setting(
            "speed_pairs",
            512,
            "pairs timed per model (0: no timing)",
            DISTILLATION,
            kind=values.non_negative_int,
        ),
        Setting(
            "speed_rounds", 3, "alternating timing rounds (best kept)", DISTILLATION, kind=values.positive_int
        ),
        # -- every command ---------------------------------------------------------------------
        Setting(
            "verbose",
            0,
            "more logging (-vv: debug)",
            OPTIONS,
            kind=values.non_negative_int,
            action="count",
            aliases=("-v",),
        ),
        Setting(
            "quiet",
            False,
            "warnings and errors only: no progress bars (evirank's, transformers', Hugging Face's)",
            OPTIONS,
            action="store_true",
            aliases=("-q",),
        ),
        # -- data and stores -------------------------------------------------------------------
        Setting(
            "home", None, "the data home (default: $EVIRANK_HOME or the cache folder)", OPTIONS, metavar="DIR"
        ),
        Setting(
            "force",
            False,
            "download again into the data home even if it is already there",
            OPTIONS,
            action="store_true",
        ),
        Setting("into", None, "the store to write", OPTIONS, metavar="DEST"),
    ]
)
