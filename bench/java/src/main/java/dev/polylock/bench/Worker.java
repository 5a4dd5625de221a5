package dev.polylock.bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Benchmark worker for the Java contenders (Redisson), driven by bench/run.py.
 *
 * <p>Usage: {@code java -cp ... dev.polylock.bench.Worker <scenario> <contender> <redis-url>
 * <lock-name> [options as JSON]}
 * <ul>
 *   <li>scenario: uncontended | contended | many (RLock only; the others answer "unsupported")</li>
 *   <li>contender: redisson (RLock) | redisson-fair (RFairLock)</li>
 * </ul>
 *
 * <p>Protocol (the same as the Rust, Python and Node workers): connect and warm up, print
 * "ready" (or "unsupported &lt;reason&gt;" and exit); read "go &lt;start-epoch-us&gt;
 * &lt;duration-s&gt;", wait for the start, run, print one JSON line of results; exit when stdin
 * closes (so connections close after the driver has read the server's counters).
 *
 * <p>Warm-up: a fresh JVM spends seconds of JIT compiler CPU before it runs at speed, so before
 * "ready" two threads loop lock / GET / SET / unlock on a private lock name of the same kind
 * (contended between them, so the pub/sub wake-up path is compiled too) until the JIT is quiet:
 * the JVM's total compilation time grew by less than {@code warmup_quiet_ms} (default 5 ms) over
 * the last second, after at least {@code warmup_min_s} (1 s) and {@code warmup_min_cycles}, or
 * until {@code warmup_max_s} (60 s). The result line reports the warm-up and the compilation
 * time spent during the timed run ({@code jit_ms_run}), which shows whether the warm-up held.
 *
 * <p>Redisson runs with its defaults except the thread pools: {@code threads} (listener and
 * callback executor, default 16) and {@code nettyThreads} (event loop, default 32) are set to 2
 * ({@code threads} / {@code netty_threads} options), sized for a 2-core machine shared by up to
 * 64 workers, as the other workers run one runtime thread or event loop each.
 */
public final class Worker {
    private Worker() {}

    static long nowUs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime() / 1e9;
    }

    static long compilationMs() {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        return jit != null && jit.isCompilationTimeMonitoringSupported() ? jit.getTotalCompilationTime() : 0;
    }

    /** Blocks the thread for the hold, as the other workers do (at least {@code nanos}). */
    static void block(long nanos) {
        long end = System.nanoTime() + nanos;
        long left;
        while ((left = end - System.nanoTime()) > 0) {
            LockSupport.parkNanos(left);
        }
    }

    static void unsupported(String reason) {
        System.out.println("unsupported " + reason);
        System.out.flush();
        System.exit(0);
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable err) {
            // Redisson's netty threads are not daemons: without this a failed worker would hang.
            err.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (args.length >= 2 && args[0].equals("serve")) {
            serve(args[1], args.length > 2 ? Json.parseObject(args[2]) : Map.of(), stdin);
            return;
        }
        if (args.length < 4) {
            System.err.println("usage: Worker <scenario> <contender> <redis-url> <lock-name> [options]\n"
                    + "       Worker serve <redis-url> [options]");
            System.exit(2);
        }
        Map<String, Object> options = args.length > 4 ? Json.parseObject(args[4]) : Map.of();
        session(args[0], args[1], args[2], args[3], options, stdin, null);
        while (stdin.readLine() != null) {
            // wait for the driver to close stdin
        }
        // The sockets close with the process; Redisson's orderly shutdown waits seconds for
        // its thread pools and adds nothing here.
        System.exit(0);
    }

    /**
     * One run of the worker protocol: connect (or use {@code client}), warm up, "ready", "go",
     * the result line. Returns the client it connected (still connected), or null.
     */
    static RedissonClient session(String scenario, String kind, String url, String name,
                                  Map<String, Object> options, BufferedReader stdin,
                                  RedissonClient shared) throws Exception {
        if (scenario.equals("many") && kind.equals("redisson-fair")) {
            System.out.println("unsupported no many in redisson-fair (the M rows hold plain locks)");
            System.out.flush();
            return null;
        }
        if (!scenario.equals("uncontended") && !scenario.equals("contended") && !scenario.equals("many")) {
            System.out.println("unsupported no " + scenario + " in the Java worker (Redisson runs in U, C and M)");
            System.out.flush();
            return null;
        }
        if (!kind.equals("redisson") && !kind.equals("redisson-fair")) {
            throw new IllegalArgumentException("unknown contender '" + kind + "'");
        }
        RedissonClient client = shared != null ? shared : Redisson.create(config(url, options));
        boolean fair = kind.equals("redisson-fair");
        Map<String, Object> result = switch (scenario) {
            case "uncontended" -> uncontended(client, fair, name, options, stdin);
            case "many" -> many(client, name, options, stdin);
            default -> contended(client, fair, name, options, stdin);
        };
        System.out.println(Json.write(result));
        System.out.flush();
        return shared != null ? null : client;
    }

    /**
     * A pooled worker: one JVM that runs many sessions, so that the JIT warm-up (10-20 s of
     * compiler CPU per JVM) is paid once per run of the driver instead of once per worker
     * process. It connects one Redisson client, warms both lock kinds on it, prints "ready",
     * then serves lines "run &lt;scenario&gt; &lt;contender&gt; &lt;redis-url&gt;
     * &lt;lock-name&gt; &lt;options as JSON&gt;": each is one session of the usual protocol on
     * that client (a URL other than the pool's gets a client of its own for the session), ended
     * by the line "end" (where a one-shot worker would see stdin close), answered "ended".
     * The client stays connected between sessions, as in a long-lived service: a new client per
     * session would make the JIT compile again (new instances deoptimise warm call sites).
     */
    static void serve(String url, Map<String, Object> options, BufferedReader stdin) throws Exception {
        RedissonClient pooled = Redisson.create(config(url, options));
        Map<String, Object> warm = warmUp(pooled, null, "bench:warmup", options);
        System.out.println("ready " + Json.write(warm));
        System.out.flush();
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            String[] words = line.trim().split(" ", 6);
            if (words.length < 5 || !words[0].equals("run")) {
                throw new IllegalStateException("expected 'run <scenario> <contender> <url> <name> [options]', got '"
                        + line + "'");
            }
            Map<String, Object> cell = words.length > 5 ? Json.parseObject(words[5]) : Map.of();
            RedissonClient own = session(words[1], words[2], words[3], words[4], cell, stdin,
                    words[3].equals(url) ? pooled : null);
            String next;
            while ((next = stdin.readLine()) != null && !next.trim().equals("end")) {
                // nothing else is expected before "end"
            }
            if (own != null) {
                own.shutdown(0, 10, TimeUnit.SECONDS);
            }
            if (next == null) {
                break;
            }
            System.out.println("ended");
            System.out.flush();
        }
        System.exit(0);
    }

    static Config config(String url, Map<String, Object> options) {
        URI uri = URI.create(url);
        Config config = new Config();
        config.setThreads(intOption(options, "threads", 2));
        config.setNettyThreads(intOption(options, "netty_threads", 2));
        var server = config.useSingleServer()
                .setAddress(uri.getScheme() + "://" + uri.getHost() + ":" + uri.getPort());
        String path = uri.getPath() == null ? "" : uri.getPath().replace("/", "");
        if (!path.isEmpty()) {
            server.setDatabase(Integer.parseInt(path));
        }
        return config;
    }

    static RLock lockOf(RedissonClient client, boolean fair, String name) {
        return fair ? client.getFairLock(name) : client.getLock(name);
    }

    static int intOption(Map<String, Object> options, String key, int fallback) {
        Object value = options.get(key);
        return value instanceof Number ? ((Number) value).intValue() : fallback;
    }

    static double doubleOption(Map<String, Object> options, String key, double fallback) {
        Object value = options.get(key);
        return value instanceof Number ? ((Number) value).doubleValue() : fallback;
    }

    /**
     * Loops lock / GET / SET / unlock on a private name from two threads until the JIT is quiet
     * (or the bound passes); returns what it did.
     */
    static Map<String, Object> warmUp(RedissonClient client, Boolean fair, String name,
                                      Map<String, Object> options) throws InterruptedException {
        double maxS = doubleOption(options, "warmup_max_s", 60);
        double minS = Math.min(maxS, doubleOption(options, "warmup_min_s", 1));
        long minCycles = (long) doubleOption(options, "warmup_min_cycles", 2000);
        double quietMs = doubleOption(options, "warmup_quiet_ms", 5);
        // A pause after each cycle leaves CPU to the compiler threads (and to the JVMs warming
        // beside this one): the JIT needs the counts, not the speed.
        long pauseNanos = (long) (doubleOption(options, "warmup_pause_us", 500) * 1000);
        String own = name + ":warmup:" + ProcessHandle.current().pid();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong cycles = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        long compileBefore = compilationMs();
        double cpuBefore = cpuSeconds();
        long started = System.nanoTime();
        // Two threads per lock kind (both kinds when fair is null, as a pooled worker serves both).
        List<Boolean> kinds = fair == null ? List.of(false, false, true, true) : List.of(fair, fair);
        for (int index = 0; index < kinds.size(); index++) {
            boolean kindFair = kinds.get(index);
            String lockName = own + (kindFair ? ":fair" : ":plain");
            Thread thread = new Thread(() -> {
                RLock lock = lockOf(client, kindFair, lockName);
                RBucket<String> counter = client.getBucket(lockName + ":counter", StringCodec.INSTANCE);
                while (!stop.get()) {
                    try {
                        lock.lock();
                        try {
                            String value = counter.get();
                            counter.set(Long.toString((value == null ? 0 : Long.parseLong(value)) + 1));
                        } finally {
                            lock.unlock();
                        }
                        cycles.incrementAndGet();
                    } catch (RedisException err) {
                        // Redisson's own timeouts on a starved machine: counted; too many fail.
                        synchronized (errors) {
                            errors.add(err);
                            if (errors.size() > 50) {
                                return;
                            }
                        }
                    }
                    if (pauseNanos > 0) {
                        LockSupport.parkNanos(pauseNanos);
                    }
                }
            }, "warmup-" + index);
            thread.setDaemon(true);
            thread.start();
            threads.add(thread);
        }
        // Compilation time sampled every 250 ms; quiet = the last four samples (1 s) grew < quietMs.
        List<Long> samples = new ArrayList<>();
        boolean quiet = false;
        while (true) {
            Thread.sleep(250);
            samples.add(compilationMs());
            double elapsed = (System.nanoTime() - started) / 1e9;
            int n = samples.size();
            if (elapsed >= minS && cycles.get() >= minCycles && n >= 5
                    && samples.get(n - 1) - samples.get(n - 5) < quietMs) {
                quiet = true;
                break;
            }
            if (elapsed >= maxS || errors.size() > 50) {
                break;
            }
        }
        stop.set(true);
        for (Thread thread : threads) {
            thread.join(30_000);
        }
        if (errors.size() > 50) {
            throw new IllegalStateException("warm-up failed: " + errors.size() + " errors", errors.get(0));
        }
        Map<String, Object> warm = new LinkedHashMap<>();
        warm.put("seconds", (System.nanoTime() - started) / 1e9);
        warm.put("cycles", cycles.get());
        warm.put("jit_ms", compilationMs() - compileBefore);
        warm.put("cpu_s", cpuSeconds() - cpuBefore);
        warm.put("quiet", quiet);
        warm.put("errors", errors.size());
        client.getKeys().delete(own + ":plain:counter", own + ":fair:counter");
        return warm;
    }

    /** Prints "ready", reads "go <start-us> <duration-s>", sleeps until the start. */
    static double[] handshake(BufferedReader stdin) throws Exception {
        System.out.println("ready");
        System.out.flush();
        String line = stdin.readLine();
        String[] words = line == null ? new String[0] : line.trim().split("\\s+");
        if (words.length != 3 || !words[0].equals("go")) {
            throw new IllegalStateException("expected 'go <start-us> <duration-s>', got '" + line + "'");
        }
        long startUs = Long.parseLong(words[1]);
        double duration = Double.parseDouble(words[2]);
        long delayUs = startUs - nowUs();
        if (delayUs > 0) {
            Thread.sleep(delayUs / 1000, (int) (delayUs % 1000) * 1000);
        }
        return new double[] {startUs, duration};
    }

    static Map<String, Object> uncontended(RedissonClient client, boolean fair, String name,
                                           Map<String, Object> options, BufferedReader stdin) throws Exception {
        Map<String, Object> warm = warmUp(client, fair, name, options);
        RLock lock = lockOf(client, fair, name);
        for (int i = 0; i < 20; i++) {
            lock.lock();
            lock.unlock();
        }
        double duration = handshake(stdin)[1];
        long compileBefore = compilationMs();
        double cpuBefore = cpuSeconds();
        long started = System.nanoTime();
        long deadline = started + (long) (duration * 1e9);
        long cycles = 0;
        long errors = 0;
        while (System.nanoTime() < deadline) {
            try {
                lock.lock();
            } catch (RedisException err) {
                errors++; // Redisson gave up waiting (its own timeouts): counted, tried again
                continue;
            }
            try {
                lock.unlock();
            } catch (RedisException err) {
                errors++;
            }
            cycles++;
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("cycles", cycles);
        result.put("seconds", (System.nanoTime() - started) / 1e9);
        result.put("cpu_s", cpuSeconds() - cpuBefore);
        result.put("jit_ms_run", compilationMs() - compileBefore);
        result.put("errors", errors);
        result.put("warmup", warm);
        return result;
    }

    /**
     * M: {@code holders} RLocks on distinct names (default 64), each cycled lock / unlock by its
     * own chain of asynchronous calls under its own thread id, as many holders in one service
     * would; a second of the same before "ready" compiles the asynchronous path too.
     */
    static Map<String, Object> many(RedissonClient client, String name, Map<String, Object> options,
                                    BufferedReader stdin) throws Exception {
        Map<String, Object> warm = warmUp(client, false, name, options);
        List<RLock> locks = new ArrayList<>();
        for (int index = 0; index < intOption(options, "holders", 64); index++) {
            locks.add(client.getLock(name + ":" + index));
        }
        cycleAll(locks, 1.0);
        double duration = handshake(stdin)[1];
        long compileBefore = compilationMs();
        double cpuBefore = cpuSeconds();
        long started = System.nanoTime();
        long[] counts = cycleAll(locks, duration);
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("cycles", counts[0]);
        result.put("seconds", (System.nanoTime() - started) / 1e9);
        result.put("cpu_s", cpuSeconds() - cpuBefore);
        result.put("jit_ms_run", compilationMs() - compileBefore);
        result.put("errors", counts[1]);
        result.put("warmup", warm);
        return result;
    }

    /** Cycles every lock of {@code locks} at once for {@code seconds}: {cycles, errors}. */
    static long[] cycleAll(List<RLock> locks, double seconds) throws InterruptedException {
        AtomicLong cycles = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        CountDownLatch done = new CountDownLatch(locks.size());
        for (int index = 0; index < locks.size(); index++) {
            cycle(locks.get(index), index + 1, deadline, cycles, errors, done);
        }
        done.await();
        return new long[] {cycles.get(), errors.get()};
    }

    /** One lock / unlock of {@code lock} under {@code threadId}, then the next, until the deadline. */
    static void cycle(RLock lock, long threadId, long deadline, AtomicLong cycles, AtomicLong errors,
                      CountDownLatch done) {
        if (System.nanoTime() >= deadline) {
            done.countDown();
            return;
        }
        lock.lockAsync(threadId)
                .thenCompose(locked -> lock.unlockAsync(threadId))
                .whenComplete((unlocked, err) -> {
                    if (err == null) {
                        cycles.incrementAndGet();
                        cycle(lock, threadId, deadline, cycles, errors, done);
                        return;
                    }
                    // Counted; the next try a millisecond later (never a recursion that spins).
                    errors.incrementAndGet();
                    CompletableFuture.delayedExecutor(1, TimeUnit.MILLISECONDS).execute(
                            () -> cycle(lock, threadId, deadline, cycles, errors, done));
                });
    }

    static Map<String, Object> contended(RedissonClient client, boolean fair, String name,
                                         Map<String, Object> options, BufferedReader stdin) throws Exception {
        long holdNanos = (long) doubleOption(options, "hold_us", 1000) * 1000;
        Object counterName = options.get("counter");
        if (!(counterName instanceof String)) {
            throw new IllegalArgumentException("contended needs a 'counter' option");
        }
        Map<String, Object> warm = warmUp(client, fair, name, options);
        RBucket<String> counter = client.getBucket((String) counterName, StringCodec.INSTANCE);
        RLock lock = lockOf(client, fair, name);
        lock.lock();
        lock.unlock();
        double[] go = handshake(stdin);
        long endUs = (long) go[0] + (long) (go[1] * 1e6);
        long compileBefore = compilationMs();
        List<Long> waits = new ArrayList<>();
        List<long[]> holds = new ArrayList<>();
        long errors = 0;
        while (nowUs() < endUs) {
            long asked = nowUs();
            try {
                lock.lock();
            } catch (RedisException err) {
                errors++; // Redisson gave up waiting (its own timeouts): counted, tried again
                continue;
            }
            long got = nowUs();
            // The non-atomic increment the lock protects: GET, hold, SET.
            String value = counter.get();
            block(holdNanos);
            counter.set(Long.toString((value == null ? 0 : Long.parseLong(value)) + 1));
            long releasing = nowUs();
            try {
                lock.unlock();
            } catch (RedisException err) {
                errors++;
            }
            waits.add(got - asked);
            holds.add(new long[] {got, releasing});
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("cycles", holds.size());
        result.put("waits_us", waits);
        result.put("holds", holds);
        result.put("jit_ms_run", compilationMs() - compileBefore);
        result.put("errors", errors);
        result.put("warmup", warm);
        return result;
    }

    /** Just enough JSON: the driver's flat options object in, the result line out. */
    static final class Json {
        private final String text;
        private int at;

        private Json(String text) {
            this.text = text;
        }

        static Map<String, Object> parseObject(String text) {
            Json json = new Json(text);
            Object value = json.value();
            if (!(value instanceof Map)) {
                throw new IllegalArgumentException("options must be a JSON object: " + text);
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> map = (Map<String, Object>) value;
            return map;
        }

        private void space() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
        }

        private Object value() {
            space();
            char c = text.charAt(at);
            if (c == '{') {
                Map<String, Object> map = new LinkedHashMap<>();
                at++;
                space();
                if (text.charAt(at) == '}') {
                    at++;
                    return map;
                }
                while (true) {
                    space();
                    String key = (String) value();
                    space();
                    expect(':');
                    map.put(key, value());
                    space();
                    if (text.charAt(at) == ',') {
                        at++;
                        continue;
                    }
                    expect('}');
                    return map;
                }
            }
            if (c == '[') {
                List<Object> list = new ArrayList<>();
                at++;
                space();
                if (text.charAt(at) == ']') {
                    at++;
                    return list;
                }
                while (true) {
                    list.add(value());
                    space();
                    if (text.charAt(at) == ',') {
                        at++;
                        continue;
                    }
                    expect(']');
                    return list;
                }
            }
            if (c == '"') {
                StringBuilder out = new StringBuilder();
                at++;
                while (text.charAt(at) != '"') {
                    char ch = text.charAt(at++);
                    if (ch == '\\') {
                        char escaped = text.charAt(at++);
                        switch (escaped) {
                            case 'n' -> out.append('\n');
                            case 't' -> out.append('\t');
                            case 'r' -> out.append('\r');
                            case 'b' -> out.append('\b');
                            case 'f' -> out.append('\f');
                            case 'u' -> {
                                out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                                at += 4;
                            }
                            default -> out.append(escaped);
                        }
                    } else {
                        out.append(ch);
                    }
                }
                at++;
                return out.toString();
            }
            for (String word : new String[] {"true", "false", "null"}) {
                if (text.startsWith(word, at)) {
                    at += word.length();
                    return word.equals("null") ? null : Boolean.valueOf(word);
                }
            }
            int start = at;
            while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
                at++;
            }
            String number = text.substring(start, at);
            if (number.isEmpty()) {
                throw new IllegalArgumentException("bad JSON at " + start + ": " + text);
            }
            return number.matches("-?\\d+") ? (Object) Long.parseLong(number) : (Object) Double.parseDouble(number);
        }

        private void expect(char c) {
            if (text.charAt(at) != c) {
                throw new IllegalArgumentException("expected '" + c + "' at " + at + ": " + text);
            }
            at++;
        }

        static String write(Object value) {
            StringBuilder out = new StringBuilder();
            write(out, value);
            return out.toString();
        }

        private static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof Map<?, ?> map) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> entry : map.entrySet()) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    write(out, entry.getKey().toString());
                    out.append(':');
                    write(out, entry.getValue());
                }
                out.append('}');
            } else if (value instanceof List<?> list) {
                out.append('[');
                for (int i = 0; i < list.size(); i++) {
                    if (i > 0) {
                        out.append(',');
                    }
                    write(out, list.get(i));
                }
                out.append(']');
            } else if (value instanceof long[] longs) {
                out.append('[');
                for (int i = 0; i < longs.length; i++) {
                    if (i > 0) {
                        out.append(',');
                    }
                    out.append(longs[i]);
                }
                out.append(']');
            } else if (value instanceof String text) {
                out.append('"');
                for (char ch : text.toCharArray()) {
                    if (ch == '"' || ch == '\\') {
                        out.append('\\').append(ch);
                    } else if (ch < 0x20) {
                        out.append(String.format("\\u%04x", (int) ch));
                    } else {
                        out.append(ch);
                    }
                }
                out.append('"');
            } else if (value instanceof Double d) {
                out.append(d.isNaN() || d.isInfinite() ? "null" : d.toString());
            } else {
                out.append(value);
            }
        }
    }
}
