package dev.svc.android

import dev.svc.android.internal.Times
import dev.svc.android.internal.retryAfterMs
import java.io.File
import java.time.Instant
import java.time.ZoneOffset
import java.time.format.DateTimeFormatter
import kotlin.random.Random
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** The timestamps the library parses without `java.time` (API 26; the library supports API 24). */
class TimesTest {
    @Test
    fun `ISO timestamps and HTTP dates parse to the instants java time reads`() {
        val random = Random(11)
        repeat(5_000) {
            val ms = random.nextLong(-2_000_000_000_000L, 32_000_000_000_000L)
            val instant = Instant.ofEpochMilli(ms)
            val iso = DateTimeFormatter.ISO_INSTANT.format(instant)
            assertEquals(ms, Times.isoMillis(iso), iso)
            val seconds = Instant.ofEpochSecond(Math.floorDiv(ms, 1000L))
            val http = DateTimeFormatter.RFC_1123_DATE_TIME.format(seconds.atOffset(ZoneOffset.UTC)).replace("+0000", "GMT")
            // RFC 1123 prints days below 10 with one digit; IMF-fixdate has two.
            val fixdate = http.replace(Regex("""^(\w{3}), (\d) """), "$1, 0$2 ")
            if (seconds.atOffset(ZoneOffset.UTC).year in
                1000..9999
            ) {
                assertEquals(seconds.toEpochMilli(), Times.httpDateMillis(fixdate), fixdate)
            }
        }
        assertEquals(1_795_830_355_000L, Times.isoMillis("2026-11-28T01:45:55Z"))
        assertEquals(1_795_830_355_900L, Times.isoMillis("2026-11-28T01:45:55.9Z"))
        assertEquals(1_795_830_355_123L, Times.isoMillis("2026-11-28T01:45:55.123456789Z"))
        for (bad in listOf("", "2026-11-28", "2026-11-28T01:45:55+01:00", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z")) {
            assertNull(Times.isoMillis(bad), bad)
        }
    }

    @Test
    fun `Retry-After is delay-seconds or an HTTP date`() {
        val now = Times.isoMillis("2026-11-28T10:00:00Z")!!
        assertEquals(2_000L, retryAfterMs("2", now))
        assertEquals(0L, retryAfterMs(" 0 ", now))
        assertEquals(5_000L, retryAfterMs("Sat, 28 Nov 2026 10:00:05 GMT", now))
        assertEquals(0L, retryAfterMs("Sat, 28 Nov 2026 09:59:00 GMT", now), "a past date: at once")
        for (bad in listOf(null, "", "-1", "1.5", "soon", "Sat, 28 Xyz 2026 10:00:05 GMT")) assertNull(retryAfterMs(bad, now), bad)
    }

    @Test
    fun `the library's classes use no Java API newer than its minSdk 24`() {
        // Packages Android added in API 26 or later (java.time, java.nio.file, Base64, VarHandle, Flow).
        val newer = listOf("java/time/", "java/nio/file/", "java/util/Base64", "java/lang/invoke/VarHandle", "java/util/concurrent/Flow")
        val classes = File("target/classes").walk().filter { it.extension == "class" }.toList()
        assertTrue(classes.size > 50, "compiled classes found: ${classes.size}")
        val users = classes.mapNotNull { file ->
            val text = String(file.readBytes(), Charsets.ISO_8859_1)
            newer.filter { it in text }.takeIf { it.isNotEmpty() }?.let { "${file.name}: $it" }
        }
        assertEquals(emptyList<String>(), users)
    }
}
