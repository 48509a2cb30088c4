# worker/_entries.pyx: the read-ahead's streak (worker/readahead.py) and its reply wait.
# What a reply of a read ahead sets off, inside the connection's data_received: its
# entries dispatched, the next read written with the acks, and the wait for the next
# reply.  tests/support/readahead_spec.py's PyStreak and PyReplyWait are the same in
# Python, the executable spec (tests/worker/test_fast_dispatch.py and test_reply_wait.py run
# both).  In C because in Python these are a large share of a no-op job's CPU
# (docs/benchmarks.md, "The read path, third pass").

cdef int W_MOST = 16, W_COOL = 64, W_COOL_MOST = 4096, W_WINDOW = 128, W_NEAR_MIN = 2
cdef double W_LIMIT = 0.75


cdef class ReplyWait:
    """The read-ahead's wait for a due reply (tests/support/readahead_spec.py's PyReplyWait,
    its spec, says why it turns and when it sleeps):
    in C because due, arrived and each turn as Python calls were a visible share of a
    no-op drain's time (docs/benchmarks.md, "Moved from comments").
    `fixed` >= 0 fixes the turns instead of learning them (bench/slowdown.py).  The
    n_* counters say how the waits ended (bench/slowdown.py reply-stats)."""

    MOST, LIMIT, COOL, COOL_MOST = W_MOST, W_LIMIT, W_COOL, W_COOL_MOST
    WINDOW, NEAR_MIN = W_WINDOW, W_NEAR_MIN

    cdef object _loop, _turn_cb, _context
    cdef public int budget, cooldown, backoff, turns, fixed, window, near
    cdef public double missed
    cdef public long n_present, n_near, n_late, n_slept
    cdef public bint spinning
    cdef bint _queued

    def __init__(self, loop):
        self._loop = loop
        self._turn_cb = self._turn
        # The turns run in a context of their own, made once: call_soon would copy the
        # current one for each turn.
        self._context = contextvars.Context()
        self.budget = W_MOST
        self.missed = 0.0
        self.cooldown = 0
        self.backoff = W_COOL
        self.spinning = False
        self.turns = 0
        self.fixed = -1
        self.window = self.near = 0
        self._queued = False

    cpdef due(self):
        """A reply is due and none is here: turn the loop for it, if that pays."""
        if not self.spinning and self.budget:
            self.spinning = True
            self.turns = 0
            if not self._queued:
                self._queued = True
                self._loop.call_soon(self._turn_cb, context=self._context)

    cpdef arrived(self):
        """A reply came (in data_received)."""
        if self.spinning:  # within its turns
            self.spinning = False
            if self.turns <= 1:  # it was in already: epoll would not have slept
                self.n_present += 1
            else:  # the turns saved a sleep
                self.n_near += 1
                self.near += 1
            if self.fixed < 0:
                self.missed -= self.missed / 8
                self._waited()
        elif self.fixed >= 0 or not self.budget:
            self.n_slept += 1
            if self.fixed < 0:
                self.cooldown -= 1
                if self.cooldown <= 0:  # try turning again
                    self.budget = W_MOST
                    self.missed = W_LIMIT / 2
                    self.window = self.near = 0
        if self.fixed >= 0:
            self.budget = self.fixed

    cdef void _waited(self):
        """A wait that turned has ended: every WINDOW of them, did the turns pay?"""
        self.window += 1
        if self.window < W_WINDOW:
            return
        if self.near < W_NEAR_MIN:  # the replies were in or came late: turning saved nothing
            self._sleep()
        else:
            if self.missed < W_LIMIT / 2:
                self.backoff = W_COOL
            self.window = self.near = 0

    cdef void _sleep(self):
        self.budget = 0
        self.cooldown = self.backoff
        self.backoff = min(W_COOL_MOST, 2 * self.backoff)
        self.window = self.near = 0

    def _turn(self):
        if not self.spinning:
            self._queued = False
            return
        self.turns += 1
        if self.turns < self.budget:
            self._loop.call_soon(self._turn_cb, context=self._context)
            return
        self._queued = self.spinning = False  # ran out of turns: the loop sleeps in epoll
        self.n_late += 1
        if self.fixed >= 0:
            return
        self.missed += (1 - self.missed) / 8
        if self.missed > W_LIMIT:
            self._sleep()
        else:
            self._waited()


cdef class _Hook:
    """What stands where a reply's future would in the connection's queue of waiters:
    quacks like stream.wire.Hook (done, cancel, set_result, set_exception)."""

    cdef bint _done

    def done(self):
        return self._done

    def cancel(self):
        self._done = True
        return True

    def set_exception(self, error):
        self.set_result(error)


cdef class AckReply(_Hook):
    """Where the reply of an XACK sent with the reads ahead goes: the acks are settled."""

    cdef public object acker
    cdef public list ids

    def __init__(self, acker, list ids):
        self.acker = acker
        self.ids = ids
        self._done = False

    def set_result(self, reply):
        self._done = True
        self.acker.settle(self.ids, reply if isinstance(reply, BaseException) else None)


cdef class AheadRead(_Hook):
    """One read ahead on the wire: its reserved slots (n), the acks written with it (the
    first read of a write carries them), and where its reply goes."""

    cdef public Streak streak
    cdef public Py_ssize_t n
    cdef public object acks

    def __init__(self, Streak streak, Py_ssize_t n):
        self.streak = streak
        self.n = n
        self.acks = None
        self._done = False

    def set_result(self, reply):
        self._done = True
        self.streak._arrived(reply)


cdef class Streak:
    """The state of one streak of reads ahead and what each reply does (readahead.py's
    ReadAhead runs it: `fill` to begin, then `done` is resolved when it has ended)."""

    cdef public object wire  # the reads on the wire, in order (a deque of AheadRead)
    cdef public bint ending, dry
    cdef public object error, done, wait  # wait: a ReplyWait (tests: PyReplyWait)
    cdef object reader, slots, acker, dispatcher, conn
    cdef bytes stream, group
    cdef Py_ssize_t ahead, cap
    cdef dict commands  # XREADGROUP '>' packed, by count

    def __init__(self, reader, Py_ssize_t ahead, Py_ssize_t cap):
        self.reader = reader
        self.slots = reader.slots
        self.acker = reader.acker
        self.dispatcher = reader.dispatcher
        self.conn = reader.conn
        s = reader.settings
        self.stream = s.stream.encode()
        self.group = s.group.encode()
        self.ahead = ahead
        self.cap = cap
        self.commands = {}
        self.wire = collections.deque()
        self.ending = self.dry = False
        self.error = self.done = self.wait = None

    cpdef fill(self):
        """Send reads until `ahead` are on the wire or no slot is free: in one write,
        with the acks queued."""
        cdef Py_ssize_t room = self.ahead - len(self.wire), k, total = 0
        cdef list reads = [], datas, hooks
        cdef AheadRead read
        slots = self.slots
        while room > 0:
            k = slots.try_reserve(self.cap)
            if not k:
                break
            reads.append(AheadRead(self, k))
            total += k
            room -= 1
        if not reads:
            return
        conn = self.conn
        # FastConnection.connected, write_hooked and Protocol.write_hooked spelled out
        # (resp.py, wire.py): three Python calls a read.  ASKING (a cluster slot
        # migrating) takes the general path.
        proto = conn._proto
        transport = None if proto is None else proto.transport
        if transport is None or transport.is_closing():
            slots.unreserve(total)
            return
        acker = self.acker
        # Acker.take spelled out (acks.py): what is queued is now being sent
        ids = acker.queued
        if ids:
            acker.queued = []
            acker.flushing.update(ids)
        datas = []
        for read in reads:
            command = self.commands.get(read.n)
            if command is None:
                command = self.commands[read.n] = self.reader.read_command(read.n, block=False)
            datas.append(command)
        hooks = reads
        if ids:
            acks = AckReply(acker, ids)
            (<AheadRead>reads[0]).acks = acks  # cancelled with the first read
            datas.insert(0, pack_xack(self.stream, self.group, ids))
            hooks = [acks] + reads
        try:
            if proto.asking:
                conn.write_hooked(datas, hooks)
            else:
                proto.waiters.extend(hooks)
                transport.write(b"".join(datas))
                conn._deadlines.add(proto, hooks[len(hooks) - 1], conn._timeout, proto.loop)
        except BaseException as e:
            slots.unreserve(total)
            if ids:
                acker.settle(ids, e)
            raise
        self.wire.extend(reads)
        reader = self.reader
        reader.reading += len(reads)
        reader.blocking = False

    cdef _arrived(self, reply):
        """A read's reply (or its failure), in data_received: dispatch its entries and
        send the next read.  Never raises: an error ends the streak and `run` raises it."""
        cdef AheadRead read = self.wire.popleft()
        reader = self.reader
        reader.reading -= 1
        wait = self.wait
        if wait is not None:
            wait.arrived()
        try:
            if isinstance(reply, BaseException):
                self.slots.unreserve(read.n)
                self._end(reply)
            else:
                # hiredis' [[stream, [[id, fields], ...]]] as it is (no copy a read)
                entries = reply[0][1] if reply else []
                # in data_received: no task is current (in_task False)
                self.dispatcher.dispatch(entries, read.n, None, None, False)
                if self.ending:
                    pass
                elif len(entries) < read.n or reader.must_pause():
                    self.ending = True
                    self.dry = not entries
                else:  # Redis serves the next read while the jobs of this one run
                    self.fill()
                    if not self.wire:  # no slot free: the consume loop waits for one
                        self.ending = True
        except BaseException as e:  # data_received must not raise: run() raises it
            self._end(e)
        self._settled()

    cdef _settled(self):
        """Ended, and every read sent is collected: `run` returns.  Else a reply is due:
        wait for it (ReplyWait)."""
        if self.wire:
            # the next reply is due, unless it came with this one (handled next)
            # has more of what Redis sent come in with this reply? (the parser's buffer)
            proto = self.conn._proto
            if self.wait is not None and (proto is None or not proto.reader.has_data()):
                self.wait.due()
            return
        done = self.done
        if self.ending and done is not None and not done.done():
            done.set_result(None)

    cdef _end(self, error):
        self.ending = True
        if self.error is None:
            self.error = error
