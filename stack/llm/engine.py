"""One llama.cpp model, one generation at a time, every generation capped and cancellable.

Why not `Llama.create_chat_completion`: it accepts no stopping criteria, so a non-streaming
generation cannot be stopped once its client has gone, and its stream carries no token counts.
This engine renders the chat template itself (the GGUF's own Jinja template, with `tools`), then
drives `Llama.generate` token by token, which gives it three things the stock path lacks:
* a cancel flag checked after every token, and the same flag read by llama.cpp's abort callback
  inside each evaluation, so a gone client frees the model even in the middle of a long prompt;
* exact prompt and completion token counts for `usage`, streaming or not;
* a cap it enforces itself, including the room left in the context window.
"""

from __future__ import annotations

import codecs
import ctypes
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from stack.llm.prefix_state import Source, Warmed, hold, stable_prefix
from stack.llm.prefix_store import PrefixStore, model_key, tokens_key
from stack.llm.prompt_cache import PromptCache, common_prefix, context_tokens, load_state, save_state
from stack.llm.protocol import ChatRequest
from stack.llm.template_quirks import single_braces, wants_object_arguments, with_object_arguments
from stack.llm.tool_grammar import call_schema, for_grammar, forced_opening, grammar_text
from stack.llm.tool_prompt import with_tools_in_system_message

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

log = logging.getLogger("lane.llm")

LOCK_POLL_S = 0.1
WARMED_KEPT = 16
# A request whose opening (its first system messages and its tools) renders to at least this many
# tokens, and was seen before, has that opening's KV state saved on disk. An agent that brings its
# own tools sends the same system prompt and tools (8-15k tokens) on every request, and on two
# laptop cores evaluating them costs minutes: saved, a restarted lane reads only what follows them.
# In proxy mode the lane's own questions about a client's tools (the decision's list of them, the
# answer's instruction) open with 400-900 tokens per client, each evaluated again after a restart
# unless saved (scripts/bench/client_prefix.py); a state costs about 30 KB a token on disk.
OPENING_MIN_TOKENS = 256
OPENINGS_REMEMBERED = 256
# Openings rendered and tokenized lately, kept so that an agent's opening is rendered once, not
# twice per leading system message on every request (on the model's thread).
OPENINGS_RENDERED = 8


class PromptTooLong(ValueError):
    """The rendered prompt leaves no room to generate in the context window."""


class TemplateFailure(ValueError):
    """The chat template could not render the request's messages (a client-side problem)."""


class Cancelled(Exception):
    """The client went away while the request was still waiting for the model."""


@dataclass
class Job:
    """A request on its way through the engine; `cancel` is set by whoever notices the client left."""

    request: ChatRequest
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" | "length" | "cancelled" (never sent: its client is gone)
    cancelled: bool
    cached_tokens: int = 0
    wait_s: float = 0.0
    gen_s: float = 0.0
    prompt_s: float = 0.0
    # OpenAI's `logprobs.content`, one entry per generated token, when the request asked for it.
    logprobs: tuple[dict[str, Any], ...] | None = None


class Engine:
    """Owns the `Llama` instance; `generate` is blocking and meant to run in a worker thread."""

    def __init__(
        self, model_path: Path, *, n_ctx: int, n_threads: int, cap: int, chat_template: str | None = None,
        cache_bytes: int = 0, state_dir: Path | None = None, opening_min_tokens: int = OPENING_MIN_TOKENS,
    ) -> None:
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.cap = cap
        self._template_override = chat_template
        self.prompt_cache = PromptCache(cache_bytes)
        self._state_dir = state_dir
        self._prefix_store: PrefixStore | None = None
        self.opening_min_tokens = opening_min_tokens
        # An opening's state evaluated by the running job, written to disk once the model is free.
        self._unsaved: tuple[list[int], bytes] | None = None
        # Openings evaluated in this run (tokens_key), oldest first: the second sighting saves one.
        self._openings_seen: OrderedDict[str, None] = OrderedDict()
        # The stable tokens of recent openings, by their messages, tools and tool_choice.
        self._openings_rendered: OrderedDict[str, list[int]] = OrderedDict()
        # The prefixes warmed since the start, newest last (GET /v1/lane/warm reports them).
        self.warmed: list[Warmed] = []
        self._llm: Llama | None = None
        self._formatter: Jinja2ChatFormatter | None = None
        self._lock = threading.Lock()
        self._abort_flag: threading.Event | None = None
        self._abort_callback: object = None
        self._object_arguments = False
        self.load_error: str | None = None

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    def load(self) -> None:
        """Load the model (seconds to a minute); on failure `load_error` says why."""
        try:
            self._load()
        except Exception as exc:  # any loader failure must reach /health and the log, not vanish in a thread
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.error("cannot load %s: %s", self.model_path, self.load_error)
            raise

    def _load(self) -> None:
        from llama_cpp import Llama, __version__, llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        started = time.monotonic()
        llm = Llama(
            model_path=str(self.model_path),
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            verbose=False,
        )
        template = self._template_override or llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(f"{self.model_path.name} has no chat template; pass --chat-format FILE")
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        eos, bos = llm.token_eos(), llm.token_bos()
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=_token_text(llama_cpp, vocab, eos),
            bos_token=_token_text(llama_cpp, vocab, bos),
        )
        self._vocab = vocab
        self._is_eog = llama_cpp.llama_vocab_is_eog
        self._install_abort_callback(llama_cpp, llm)
        self._object_arguments = wants_object_arguments(lambda m: self._render(m, None, None).prompt)
        if self._state_dir is not None:
            self._prefix_store = PrefixStore(self._state_dir,
                                             model_key(self.model_path, f"llama-cpp-python {__version__}"))
            for tokens, state in reversed(self._prefix_store.saved()):  # the newest ends up newest
                self.prompt_cache.put(tokens, state)
        self._llm = llm
        log.info(
            "loaded %s in %.1fs (n_ctx=%d, threads=%d, cap=%d)",
            self.model_path.name, time.monotonic() - started, self.n_ctx, self.n_threads, self.cap,
        )

    def _install_abort_callback(self, llama_cpp: object, llm: Llama) -> None:
        """llama.cpp asks this callback between graph nodes (about 600 times per token for
        SmolLM2-135M, a cost lost in the noise here), so a long prompt stops mid-batch, and a slow
        token mid-way, when the running job's client leaves."""
        lib = llama_cpp._lib  # type: ignore[attr-defined]  # the binding exports no setter for this
        lib.llama_set_abort_callback.argtypes = [ctypes.c_void_p, llama_cpp.ggml_abort_callback, ctypes.c_void_p]  # type: ignore[attr-defined]
        lib.llama_set_abort_callback.restype = None

        def should_abort(_data: object) -> bool:
            flag = self._abort_flag
            return flag is not None and flag.is_set()

        self._abort_callback = llama_cpp.ggml_abort_callback(should_abort)  # type: ignore[attr-defined]
        lib.llama_set_abort_callback(llm.ctx, self._abort_callback, None)

    def _acquire(self, cancel: threading.Event) -> None:
        """The model's lock; Cancelled when the job's client leaves while it waits."""
        while not self._lock.acquire(timeout=LOCK_POLL_S):
            if cancel.is_set():
                raise Cancelled()

    def warm(self, job: Job) -> Warmed:
        """Hold the stable prefix of `job.request`'s messages and tools (prefix_state.py) in the
        context, pinned in the RAM cache and saved on disk, so that the next request that opens
        with them evaluates only what follows. It queues for the model like any request: a
        request that arrives meanwhile waits for it, and needs the same prefix anyway."""
        started = time.monotonic()
        self._acquire(job.cancel)
        try:
            llm = self._llm
            if llm is None or self._formatter is None:
                raise RuntimeError("the model is not loaded yet")
            prefix = stable_prefix(job.request, lambda request: self._prompt(llm, request)[0])
            if len(prefix) >= self.n_ctx:
                raise PromptTooLong(f"the prefix has {len(prefix)} tokens; the context window holds {self.n_ctx}")
            self._abort_flag = job.cancel
            source, state = self._held(llm, job, prefix)
        finally:
            self._abort_flag = None
            self._lock.release()
        saved = state is not None and self._prefix_store is not None and not self._prefix_store.has(prefix)
        if saved:  # after the lock: a request waiting for the model need not wait for the disk
            assert self._prefix_store is not None and state is not None
            self._prefix_store.save(prefix, state)
        warmed = Warmed(len(prefix), source, round(time.monotonic() - started, 3), saved)
        self.warmed = [*self.warmed[-(WARMED_KEPT - 1):], warmed]
        log.info("warmed a %d-token prefix from %s in %.2fs%s", warmed.prefix_tokens, source,
                 warmed.seconds, " (saved)" if saved else "")
        return warmed

    def generate(self, job: Job, emit: Callable[[str], None]) -> Generation:
        """Wait for the model, then generate; `emit` receives text pieces as they are final.

        Raises Cancelled when the client left before the model was free, PromptTooLong when the
        prompt does not fit."""
        queued = time.monotonic()
        self._acquire(job.cancel)
        try:
            if job.cancel.is_set():
                raise Cancelled()
            wait_s = time.monotonic() - queued
            started = time.monotonic()
            outcome = self._run(job, emit)
            return replace(outcome, wait_s=wait_s, gen_s=time.monotonic() - started)
        finally:
            self._abort_flag = None
            unsaved, self._unsaved = self._unsaved, None
            self._lock.release()
            if unsaved is not None and self._prefix_store is not None:  # the disk after the lock
                self._prefix_store.save(*unsaved)
                log.info("saved a request's %d-token opening", len(unsaved[0]))

    def embed(self, text: str, cancel: threading.Event) -> tuple[list[float], int]:
        """The hidden state the model reads its next token from after `text` (the last token's,
        after the final norm), and the number of tokens. A decoder's last position holds what it
        makes of the whole text, so a linear probe on it answers a yes/no question about the text
        in any language at the cost of one prompt evaluation, no sampling (the lane's reading of
        an answer, stack/agent/reading.py). The same context serves it: embeddings are switched on
        for this one evaluation, as llama-server does per request; the longest cached prefix is
        reused and the state kept in the RAM cache like a generation's, so the next text that opens
        with the same tool list evaluates only what follows it."""
        from llama_cpp import llama_cpp

        self._acquire(cancel)
        try:
            llm = self._llm
            if llm is None:
                raise RuntimeError("the model is not loaded yet")
            tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            if not tokens or len(tokens) >= self.n_ctx:
                raise PromptTooLong(f"the input has {len(tokens)} tokens; the context window holds {self.n_ctx}")
            self._abort_flag = cancel
            # At least two tokens evaluated: on some CPU builds (AVX2 without AVX-512, measured
            # 2026-11-30) one token goes through another matrix kernel than a batch, and its hidden
            # state differs by ~3 % of the largest value, enough to move a probe's reading by
            # whether the text was cached. Every batch of two or more gives the same state.
            llm.n_tokens = self._restore_longest_prefix(llm, tokens, evaluate=2)
            llama_cpp.llama_set_embeddings(llm.ctx, True)
            try:
                try:
                    llm.eval(tokens[llm.n_tokens:])
                except RuntimeError:
                    if cancel.is_set():  # llama_decode "aborted": the client left mid-prompt
                        raise Cancelled() from None
                    raise
                pointer = llama_cpp.llama_get_embeddings_ith(llm.ctx, -1)
                if not pointer:
                    raise RuntimeError("llama.cpp returned no hidden state")
                vector = [float(pointer[i]) for i in range(llama_cpp.llama_model_n_embd(llm.model))]
            finally:
                llama_cpp.llama_set_embeddings(llm.ctx, False)
                llm._requires_eval = True  # the logits of this evaluation are not a generation's
            if cancel.is_set():
                raise Cancelled()
            if self.prompt_cache.budget_bytes:  # the next text with the same opening (tool list) reads on
                self.prompt_cache.put(context_tokens(llm), save_state(llm))
            return vector, len(tokens)
        finally:
            self._abort_flag = None
            self._lock.release()

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                tool_choice: Any) -> Any:
        assert self._formatter is not None
        try:
            # llama-cpp-python types these as its own TypedDicts; the shapes are OpenAI's, as checked by protocol.
            return self._formatter(messages=messages, tools=tools, tool_choice=tool_choice)  # type: ignore[arg-type]
        except Exception as exc:  # Jinja raises many kinds; all mean "these messages do not fit the template"
            raise TemplateFailure(f"the chat template cannot render these messages: {exc}") from exc

    def _run(self, job: Job, emit: Callable[[str], None]) -> Generation:
        llm = self._llm
        if llm is None or self._formatter is None:
            raise RuntimeError("the model is not loaded yet")
        request = job.request
        prompt, stops = self._prompt(llm, request)
        room = self.n_ctx - len(prompt)
        if room < 1:
            raise PromptTooLong(f"the prompt has {len(prompt)} tokens; the context window holds {self.n_ctx}")
        if request.seed is not None:
            llm.set_seed(request.seed)
        self._abort_flag = job.cancel
        evaluated = self._hold_opening(llm, job, prompt)
        cached = self._restore_longest_prefix(llm, prompt) - evaluated
        limit = min(request.max_tokens, room)
        schema = call_schema(request.tools, request.tool_choice) or request.response_schema
        opening, grammar = self._opening(llm, schema, limit) if request.top_logprobs is None else (None, None)
        if opening is None:
            grammar = _grammar(schema, self._vocab)
        outcome = self._sample(llm, job, prompt, stops, limit, emit, grammar, opening)
        if not outcome.cancelled and self.prompt_cache.budget_bytes:
            self.prompt_cache.put(context_tokens(llm), save_state(llm))
        return replace(outcome, cached_tokens=cached)

    def _opening(self, llm: Llama, schema: dict[str, Any] | None, limit: int
                 ) -> tuple[tuple[str, list[int]] | None, LlamaGrammar | None]:
        """The reply's forced opening (tool_grammar.forced_opening) as text and tokens, and the
        grammar of what follows it; (None, None) where there is none, it would not fit under the
        cap, or the rest has no grammar."""
        forced = forced_opening(schema)
        if forced is None:
            return None, None
        tokens = llm.tokenize(forced.text.encode("utf-8"), add_bos=False, special=False)
        grammar = _grammar(forced.rest, self._vocab, forced.closing) if len(tokens) < limit else None
        return ((forced.text, tokens), grammar) if grammar is not None else (None, None)

    def _prompt(self, llm: Llama, request: ChatRequest) -> tuple[list[int], tuple[str, ...]]:
        """The request rendered with the chat template and tokenized, and its stop strings."""
        messages = with_object_arguments(request.messages) if self._object_arguments else request.messages
        rendered = self._render(messages, request.tools, request.tool_choice)
        if request.tools and rendered.prompt == self._render(messages, None, None).prompt:
            # The template has no place for tools: describe them in the system message instead.
            rendered = self._render(with_tools_in_system_message(messages, request.tools), None, None)
        text = single_braces(rendered.prompt)
        prompt = llm.tokenize(text.encode("utf-8"), add_bos=not rendered.added_special, special=True)
        template_stops = [rendered.stop] if isinstance(rendered.stop, str) else list(rendered.stop or ())
        return prompt, tuple(dict.fromkeys(request.stop + tuple(s for s in template_stops if s)))

    def _hold_opening(self, llm: Llama, job: Job, prompt: list[int]) -> int:
        """Put a long opening that repeats but is not saved yet into the context by itself and
        keep its state (pinned in RAM; on disk once the model is free), so that a restart
        restores it instead of evaluating it, and read a saved one from disk where neither the
        context nor the RAM cache holds it; the number of its tokens evaluated now, which the
        reply does not count as cached. A short prompt or one without a system message costs
        nothing; any other, a few renders of its opening."""
        prefix = self._repeated_opening(llm, job.request, prompt)
        if prefix is None or self._prefix_store is None:
            return 0
        before = common_prefix(context_tokens(llm), prefix)
        saved = self._prefix_store.has(prefix)
        if saved and max(before, self.prompt_cache.best(prefix)[1]) == len(prefix):
            return 0  # the context or the RAM cache holds it: _restore_longest_prefix takes it from there
        source, state = self._held(llm, job, prefix)
        if state is not None and not saved:
            self._unsaved = (prefix, state)
        return len(prefix) - before if source == "evaluated" else 0

    def _held(self, llm: Llama, job: Job, prefix: list[int]) -> tuple[Source, bytes | None]:
        """prefix_state.hold, its state pinned in RAM; Cancelled when the client left mid-prefix
        (llama_decode aborted by the job's cancel flag)."""
        try:
            source, state = hold(llm, prefix, self.prompt_cache, self._prefix_store)
        except RuntimeError:
            if job.cancel.is_set():
                raise Cancelled() from None
            raise
        if state is not None:
            self.prompt_cache.put(prefix, state, pinned=True)
        return source, state

    def _repeated_opening(self, llm: Llama, request: ChatRequest, prompt: list[int]) -> list[int] | None:
        """The tokens of the longest opening of `request` (its first k system messages, and its
        tools) that is long enough and either saved or seen before: what repeats is what an agent
        sends every time. Openings seen once are remembered; a system message the caller writes
        anew each time (the lane's own facts of the turn) thus never makes one."""
        leading = _opening(request.messages)
        if self._prefix_store is None or not leading or len(prompt) < self.opening_min_tokens:
            return None
        for count in range(len(leading), 0, -1):
            prefix = self._opening_tokens(llm, replace(request, messages=leading[:count]))
            if len(prefix) < self.opening_min_tokens:
                return None  # fewer messages only make it shorter
            if common_prefix(prefix, prompt) < len(prefix):
                continue
            key = tokens_key(prefix)
            if key in self._openings_seen or self._prefix_store.has(prefix):
                self._openings_seen[key] = None
                self._openings_seen.move_to_end(key)
                return prefix
            self._openings_seen[key] = None
            while len(self._openings_seen) > OPENINGS_REMEMBERED:
                self._openings_seen.popitem(last=False)
        return None

    def _opening_tokens(self, llm: Llama, opening: ChatRequest) -> list[int]:
        """stable_prefix of an opening, remembered: besides the loaded model's template (one per
        engine), rendering reads only the messages, tools and tool_choice, so those make the key."""
        key = json.dumps([opening.messages, opening.tools, opening.tool_choice], sort_keys=True, default=str)
        tokens = self._openings_rendered.get(key)
        if tokens is None:
            tokens = stable_prefix(opening, lambda r: self._prompt(llm, r)[0])
            self._openings_rendered[key] = tokens
            while len(self._openings_rendered) > OPENINGS_RENDERED:
                self._openings_rendered.popitem(last=False)
        self._openings_rendered.move_to_end(key)
        return tokens

    def _restore_longest_prefix(self, llm: Llama, prompt: list[int], evaluate: int = 1) -> int:
        """Load the saved state sharing the longest prefix with `prompt` when it beats what the
        context holds; the number of prompt tokens that will not be evaluated again (at least the
        last `evaluate` are)."""
        reused = common_prefix(context_tokens(llm), prompt)
        entry, saved = self.prompt_cache.best(prompt)
        if entry is not None and saved > reused:
            reused = saved if load_state(llm, entry) else 0
            self.prompt_cache.touch(entry)
        # generate() always evaluates the prompt's last token again, for fresh logits.
        return max(0, min(reused, len(prompt) - evaluate))

    def _sample(self, llm: Llama, job: Job, prompt: list[int], stops: tuple[str, ...], limit: int,
                emit: Callable[[str], None], grammar: LlamaGrammar | None,
                opening: tuple[str, list[int]] | None = None) -> Generation:
        """Sample the reply after `prompt`; a forced `opening` (text, tokens) is evaluated as
        part of the prompt, passed on as the reply's first text and counted in its tokens, and
        `grammar` holds what the model writes after it."""
        from llama_cpp import StoppingCriteriaList

        request = job.request
        opened, opening_tokens = opening if opening is not None else ("", [])

        def stop_if_cancelled(_ids: object, _logits: object) -> bool:
            return job.cancel.is_set()

        text = _StopScanner(stops, emit)
        logprobs: list[dict[str, Any]] | None = None if request.top_logprobs is None else []
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        completion = len(opening_tokens)
        finish = "length"
        started = time.monotonic()
        prompt_s = 0.0
        text.feed(opened)
        tokens = llm.generate(
            prompt + opening_tokens,
            temp=request.temperature,
            top_p=request.top_p,
            top_k=request.top_k,
            min_p=request.min_p,
            repeat_penalty=request.repeat_penalty,
            presence_penalty=request.presence_penalty,
            frequency_penalty=request.frequency_penalty,
            stopping_criteria=StoppingCriteriaList([stop_if_cancelled]),
            grammar=grammar,
        )
        try:
            for token in tokens:
                prompt_s = prompt_s or time.monotonic() - started
                if self._is_eog(self._vocab, token):
                    finish = "stop"
                    break
                completion += 1
                if logprobs is not None:
                    logprobs.append(_token_logprobs(llm, token, request.top_logprobs or 0))
                if text.feed(decoder.decode(llm.detokenize([token]))):
                    finish = "stop"
                    break
                if completion >= limit:
                    break
        except RuntimeError:
            if not job.cancel.is_set():
                raise
            # llama_decode returned "aborted": the abort callback fired for a gone client.
        finally:
            tokens.close()
        if not text.stopped:
            text.feed(decoder.decode(b"", final=True))
            text.flush()
        cancelled = job.cancel.is_set()
        return Generation(text=text.emitted, prompt_tokens=len(prompt), completion_tokens=completion,
                       finish_reason="cancelled" if cancelled else finish, cancelled=cancelled,
                       prompt_s=prompt_s, logprobs=None if logprobs is None else tuple(logprobs))


def _token_logprobs(llm: Llama, token: int, alternatives: int) -> dict[str, Any]:
    """The chosen token's log-probability and its `alternatives` likeliest rivals, from the logits
    it was sampled from: llama.cpp keeps the last position's logits until the next evaluation, so
    no `logits_all` (a vocabulary-wide row per context position, gigabytes) is needed."""
    import numpy as np

    raw = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
    shifted = raw.astype(np.float64) - raw.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())
    best = np.argpartition(-logprobs, alternatives)[:alternatives] if alternatives else np.array([], dtype=int)
    best = best[np.argsort(-logprobs[best])]

    def entry(t: int) -> dict[str, Any]:
        piece = llm.detokenize([int(t)])
        return {"token": piece.decode("utf-8", errors="replace"), "logprob": float(logprobs[t]),
                "bytes": list(piece)}

    return {**entry(token), "top_logprobs": [entry(t) for t in best]}


def _grammar(schema: dict[str, Any] | None, vocab: Any, closing: int = 0) -> LlamaGrammar | None:
    """A forced tool call's or response format's grammar (tool_grammar.for_grammar: huge bounds
    left out), parsed with the model's vocabulary before it is used; a schema the converter
    cannot express leaves decoding free.
    The parse comes first because llama.cpp does not survive a grammar it cannot parse: seen
    with Google Calendar's MCP `create-event`, whose email `pattern` `^[^\\s@]+@…` the converter
    wrote as a class with `\\s` ("unknown escape"), the llm service died of a segfault in the
    next sampling step. A schema the converter or the parser refuses is tried once more
    without its `pattern`s."""
    if schema is None:
        return None
    from llama_cpp import LlamaGrammar

    for patterns in (True, False):
        try:
            text = grammar_text(for_grammar(schema, patterns=patterns), closing)
        except Exception as exc:  # the converter rejects some valid JSON schemas (a pattern's syntax)
            why = str(exc)
        else:
            if _parses(text, vocab):
                return LlamaGrammar.from_string(text, verbose=False)
            why = "llama.cpp cannot parse it"
        log.warning("no grammar for this schema (%s)%s", why,
                    "; trying it without its patterns" if patterns else "; decoding freely")
    return None


def _parses(text: str, vocab: Any) -> bool:
    """Whether llama.cpp parses the grammar (its sampler is built once and freed)."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


class _StopScanner:
    """Passes text on as soon as it cannot be the start of a stop string; cuts at the first stop."""

    def __init__(self, stops: tuple[str, ...], emit: Callable[[str], None]) -> None:
        self._stops = stops
        self._emit = emit
        self._pending = ""
        self.emitted = ""
        self.stopped = False

    def feed(self, piece: str) -> bool:
        """Add decoded text; True when a stop string was reached (the text before it is emitted)."""
        if self.stopped:
            return True
        self._pending += piece
        hits = [i for i in (self._pending.find(s) for s in self._stops) if i >= 0]
        if hits:
            self._send(self._pending[: min(hits)])
            self._pending = ""
            self.stopped = True
            return True
        hold = max((_overlap(self._pending, s) for s in self._stops), default=0)
        self._send(self._pending[: len(self._pending) - hold])
        self._pending = self._pending[len(self._pending) - hold :]
        return False

    def flush(self) -> None:
        if not self.stopped:
            self._send(self._pending)
            self._pending = ""

    def _send(self, piece: str) -> None:
        if piece:
            self.emitted += piece
            self._emit(piece)


def _overlap(text: str, stop: str) -> int:
    """Length of the longest end of `text` that is a proper start of `stop`."""
    for size in range(min(len(text), len(stop) - 1), 0, -1):
        if text.endswith(stop[:size]):
            return size
    return 0


def _token_text(llama_cpp: object, vocab: object, token: int) -> str:
    if token < 0:
        return ""
    return llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8")  # type: ignore[attr-defined]


def _opening(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's first system (or developer) messages: what an agent sends the same on every
    request, before the conversation."""
    count = next((i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")), len(messages))
    return messages[:count]
