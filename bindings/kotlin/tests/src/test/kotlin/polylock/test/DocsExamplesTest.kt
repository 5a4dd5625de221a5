package polylock.test

import java.io.File
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import polylock.Client
import polylock.withLock

/**
 * Every ```kotlin block of README.md and of the pages in docs/ must appear in a test that runs it, so the
 * docs cannot drift from the API. Compiling the blocks on their own would need a Kotlin compiler
 * at test time and a context (a `url`, a `client`, the helpers they call) written around each;
 * instead the tests hold them verbatim, and this check fails when a block is edited without its
 * test (or a new block has none).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DocsExamplesTest {
    private class Block(val id: String, val code: String)

    private val root = File(System.getProperty("polylock.repo.root") ?: error("system property polylock.repo.root is not set"))

    private fun kotlinBlocks(): List<Block> {
        val pages = listOf(File(root, "README.md")) +
            File(root, "docs").listFiles { file -> file.extension == "md" }!!.sorted()
        val blocks = mutableListOf<Block>()
        for (page in pages) {
            val lines = page.readLines()
            var index = 0
            while (index < lines.size) {
                val info = lines[index].trim()
                if (!info.startsWith("```")) {
                    index += 1
                    continue
                }
                val start = index + 1
                index = start
                while (index < lines.size && lines[index].trim() != "```") index += 1
                val language = info.removePrefix("```").split(',', ' ').first()
                if (language == "kotlin") {
                    val id = "${page.relativeTo(root)}:${start + 1}"
                    blocks += Block(id, lines.subList(start, index).joinToString("\n"))
                }
                index += 1
            }
        }
        return blocks
    }

    /** The docs connect to a fixed URL where a test has the test kit's `url`; a top-level `main`
     * there takes that URL as its argument. */
    private fun asInTests(code: String): String =
        code.replace("\"redis://127.0.0.1:6379/0\"", "url")
            .replace("suspend fun main()", "suspend fun main(url: String)")

    private fun withoutWhitespace(text: String): String = text.filterNot { it.isWhitespace() }

    @Test
    fun `every kotlin block of the docs is in a test`() {
        val sources = File(root, "bindings/kotlin/tests/src/test/kotlin").walk()
            .filter { it.isFile && it.extension == "kt" }
            .map { it.readText() }
            .toList()
        val testCode = sources.map(::withoutWhitespace)
        val testImports = sources.flatMap { it.lines() }.map { it.trim() }.filter { it.startsWith("import ") }.toSet()

        val blocks = kotlinBlocks()
        val pages = blocks.map { it.id.substringBefore(':') }.toSet()
        assertTrue("README.md" in pages && "docs/kotlin-swift.md" in pages) { "Kotlin blocks found only in $pages" }

        val missing = blocks.filter { block ->
            // A block's imports may sit at the top of the test file, the rest must be there as one piece.
            val (imports, code) = block.code.lines().partition { it.trim().startsWith("import ") }
            val importsMissing = imports.any { it.trim() !in testImports }
            val codeMissing = testCode.none { it.contains(withoutWhitespace(asInTests(code.joinToString("\n")))) }
            importsMissing || codeMissing
        }
        assertTrue(missing.isEmpty()) {
            "Kotlin blocks of the docs that no test in bindings/kotlin/tests/src/test/kotlin holds verbatim " +
                "(whitespace aside): ${missing.map { it.id }}"
        }
    }

    @Test
    fun `the README example runs`() = RedisServer.start().use { redis ->
        val url = redis.url
        val before = processedOrders.get()
        runBlocking {
            // --- README.md: Kotlin ---
            Client.connect(url).use { client ->
                client.lock("orders:42").withLock { processOrder() }  // waits; the watchdog renews the lease
            }
        }
        assertEquals(before + 1, processedOrders.get())
    }

    @Test
    fun `the idioms example of the Kotlin guide runs`() = RedisServer.start().use { redis ->
        val before = processedOrders.get()
        runBlocking { main(redis.url) }
        assertEquals(before + 1, processedOrders.get())
        assertEquals(0L, redis.command("EXISTS", "orders:42"))
    }
}
