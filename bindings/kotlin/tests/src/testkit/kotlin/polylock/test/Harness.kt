package polylock.test

import java.io.BufferedInputStream
import java.io.ByteArrayOutputStream
import java.io.File
import java.net.ServerSocket
import java.net.Socket
import java.nio.file.Files
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit

/** A port the OS says is free now (for a URL nothing listens on). */
fun freePort(): Int = ServerSocket(0).use { it.localPort }

/**
 * The server binary: system property `redis.server`, else env POLYLOCK_REDIS_SERVER (the
 * server matrix sets it for every language's test kit), else redis-server from PATH.
 */
fun serverProgram(): String =
    System.getProperty("redis.server") ?: System.getenv("POLYLOCK_REDIS_SERVER") ?: "redis-server"

/**
 * The test kit's launcher for every language (`polylock-testkit`, see docs/testing.md): system
 * property `polylock.testkit`, else `target/debug/polylock-testkit` above the working directory
 * (built by `cargo build -p polylock-testkit --bins`, as make test-kotlin does).
 */
fun launcherProgram(): String =
    System.getProperty("polylock.testkit")
        ?: generateSequence(File("").absoluteFile) { it.parentFile }
            .map { File(it, "target/debug/polylock-testkit") }
            .firstOrNull { it.canExecute() }?.path
        ?: error("target/debug/polylock-testkit not found: run `cargo build -p polylock-testkit --bins`")

/**
 * One real redis-server on a free loopback port, without persistence, started by
 * `polylock-testkit up single`; [close] closes the launcher's stdin, on which it stops the
 * server and removes its files (as it does when this JVM dies).
 */
class RedisServer private constructor(private val launcher: Process, description: String) : AutoCloseable {
    // The description is one JSON line; the first node's fields are the only ones read, so a
    // pattern does (the consumer project that shares this kit has no JSON library).
    val port: Int = field(description, "port")?.toInt() ?: error("no port in $description")

    /** The port it also serves TLS on ([startTls]). */
    val tlsPort: Int? = field(description, "tls_port")?.toInt()

    val url: String get() = "redis://127.0.0.1:$port/0"

    /** The `rediss://` URL of a server started by [startTls]. */
    val tlsUrl: String get() = "rediss://127.0.0.1:${tlsPort ?: error("not started with startTls")}/0"

    /** Sends one command on a fresh connection and returns the reply (see [RedisConnection.command]). */
    fun command(vararg args: String): Any? = RedisConnection(port).use { it.command(*args) }

    override fun close() {
        runCatching { launcher.outputStream.close() }
        if (!launcher.waitFor(30, TimeUnit.SECONDS)) {
            launcher.destroyForcibly().waitFor(5, TimeUnit.SECONDS)
        }
    }

    companion object {
        /** Starts a server with [extraArgs] (`--option value ...`) after the test kit's own. */
        fun start(vararg extraArgs: String): RedisServer = up(extraArgs.map { "--arg=$it" })

        /**
         * Starts a server that also serves TLS on a free port ([tlsUrl]) with the certificate
         * `cert` of [tlsDir] ([makeTlsFiles]), trusting its CA for client certificates, which it
         * requires when [authClients]. The plain port stays open for the kit's own checks.
         */
        fun startTls(tlsDir: File, cert: String = "server", authClients: Boolean = false): RedisServer =
            up(listOfNotNull("--tls", "--tls-dir=${tlsDir.path}", "--cert=$cert", "--auth-clients".takeIf { authClients }))

        private fun up(options: List<String>): RedisServer {
            val builder = ProcessBuilder(listOf(launcherProgram(), "up", "single") + options + "--json")
                .redirectError(ProcessBuilder.Redirect.INHERIT)
            builder.environment()["POLYLOCK_REDIS_SERVER"] = serverProgram()
            val launcher = builder.start()
            val first = CompletableFuture.supplyAsync { launcher.inputStream.bufferedReader().readLine() }
                .get(120, TimeUnit.SECONDS)
                ?: error("polylock-testkit up single ${options.joinToString(" ")} failed (exit ${launcher.waitFor()})")
            return RedisServer(launcher, first)
        }

        private fun field(json: String, name: String): String? =
            Regex("\"$name\":(\\d+)").find(json)?.groupValues?.get(1)
    }
}

/** An error reply of Redis. */
class RedisReplyException(message: String) : RuntimeException(message)

/** A tiny RESP2 client, enough for the tests to look at and change keys behind polylock's back. */
class RedisConnection(port: Int) : AutoCloseable {
    private val socket = Socket("127.0.0.1", port).apply { soTimeout = 5_000 }
    private val input = BufferedInputStream(socket.getInputStream())
    private val output = socket.getOutputStream()

    /** Replies: simple string / bulk string as String, integer as Long, nil as null, array as List. */
    fun command(vararg args: String): Any? {
        val request = ByteArrayOutputStream()
        request.write("*${args.size}\r\n".toByteArray())
        for (arg in args) {
            val bytes = arg.toByteArray()
            request.write("$${bytes.size}\r\n".toByteArray())
            request.write(bytes)
            request.write("\r\n".toByteArray())
        }
        output.write(request.toByteArray())
        output.flush()
        return readReply()
    }

    private fun readLine(): String {
        val line = ByteArrayOutputStream()
        while (true) {
            val byte = input.read()
            check(byte >= 0) { "Redis closed the connection" }
            if (byte == '\r'.code) {
                check(input.read() == '\n'.code) { "malformed reply" }
                return line.toString(Charsets.UTF_8)
            }
            line.write(byte)
        }
    }

    private fun readReply(): Any? {
        val line = readLine()
        val rest = line.substring(1)
        return when (line[0]) {
            '+' -> rest
            '-' -> throw RedisReplyException(rest)
            ':' -> rest.toLong()
            '$' -> {
                val length = rest.toInt()
                if (length < 0) return null
                val bytes = input.readNBytes(length + 2)
                String(bytes, 0, length, Charsets.UTF_8)
            }
            '*' -> {
                val count = rest.toInt()
                if (count < 0) null else List(count) { readReply() }
            }
            else -> error("unknown reply type: $line")
        }
    }

    override fun close() = socket.close()
}

/**
 * The Rust line-driven holder `target/debug/examples/peer` (see core/examples/peer.rs), with the
 * core's default watchdog timeout or `watchdogTimeoutMs`.
 */
class Peer(url: String, watchdogTimeoutMs: Long? = null) : AutoCloseable {
    private val process = ProcessBuilder(
        listOfNotNull(
            System.getProperty("polylock.peer") ?: error("system property polylock.peer is not set"),
            url,
            watchdogTimeoutMs?.toString(),
        ),
    ).redirectError(ProcessBuilder.Redirect.INHERIT).start()
    private val reader = process.inputStream.bufferedReader()
    private val writer = process.outputStream.bufferedWriter()

    /** The client id the peer printed when it connected. */
    val clientId: String

    init {
        val ready = readLine()
        check(ready.startsWith("ready ")) { "peer did not start: $ready" }
        clientId = ready.removePrefix("ready ")
    }

    /** Sends one command line and returns the reply line; every reply comes within 30 s. */
    fun send(line: String): String {
        writer.write(line)
        writer.newLine()
        writer.flush()
        return readLine()
    }

    private fun readLine(): String =
        CompletableFuture.supplyAsync { reader.readLine() }.get(30, TimeUnit.SECONDS)
            ?: error("peer exited")

    /** Kills the process at once (SIGKILL): nothing is released, nothing renewed any more. */
    fun kill() {
        process.destroyForcibly()
        check(process.waitFor(5, TimeUnit.SECONDS)) { "peer did not die" }
    }

    override fun close() {
        if (!process.isAlive) return
        runCatching {
            writer.write("quit\n")
            writer.flush()
        }
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(5, TimeUnit.SECONDS)
        }
    }
}

/**
 * Test certificates made with openssl into a new temporary directory by tests/tls/make-certs.sh
 * (the generator the Rust, Python and Node test kits share; see it for the file names).
 */
fun makeTlsFiles(): File {
    val dir = Files.createTempDirectory("polylock-kotlin-tls-").toFile()
    val script = generateSequence(File("").absoluteFile) { it.parentFile }
        .map { File(it, "tests/tls/make-certs.sh") }
        .firstOrNull { it.isFile } ?: error("tests/tls/make-certs.sh not found above the working directory")
    val process = ProcessBuilder("sh", script.path, dir.path).inheritIO().start()
    check(process.waitFor() == 0) { "make-certs.sh failed; is openssl installed?" }
    return dir
}

/** Like assertThrows, but inline, so the block may call suspend functions. */
inline fun <reified T : Throwable> expectThrows(block: () -> Unit): T {
    try {
        block()
    } catch (error: Throwable) {
        if (error is T) return error
        throw AssertionError("expected ${T::class.qualifiedName}, got $error", error)
    }
    throw AssertionError("expected ${T::class.qualifiedName}, but nothing was thrown")
}
