package dev.svc.android

import dev.svc.android.internal.EventFrame
import dev.svc.android.internal.MessageReceivedData
import dev.svc.android.internal.ParticipantTable
import dev.svc.android.internal.UnknownFrame
import dev.svc.android.internal.decodeServerFrame
import kotlin.random.Random
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** The room's packed participant records and the frame decoder's one-pass path. */
class ParticipantTableTest {
    private fun participant(sid: String, avatar: String? = null, host: Boolean = false) =
        SvcParticipant(sid, "user-$sid", "Ñame ✓ $sid", avatar, host, "2026-11-27T15:38:02.123Z", connected = !host)

    @Test
    fun `records read back as they were written, in join order, through growth, replacement and removal`() {
        val table = ParticipantTable()
        val model = LinkedHashMap<String, SvcParticipant>()
        val random = Random(7)
        repeat(2_000) { step ->
            // few distinct sids, so puts replace and removals hit, and the index grows and shrinks its runs
            val sid = "PA_${random.nextInt(150)}"
            if (random.nextInt(3) == 0) {
                assertEquals(model.remove(sid), table.remove(sid)?.toParticipant(), "step $step remove $sid")
            } else {
                val p = participant(sid, avatar = if (random.nextBoolean()) "https://a/$step" else null, host = random.nextBoolean())
                model[sid] = p
                table.put(p)
            }
            assertEquals(model.values.toList(), table.values().map { it.toParticipant() }, "step $step")
        }
        for (sid in (0 until 150).map { "PA_$it" }) {
            assertEquals(model[sid], table[sid]?.toParticipant())
            assertEquals(sid in model, sid in table)
        }
    }

    @Test
    fun `an empty avatar stays distinct from none, and colliding hashes still find their own record`() {
        val table = ParticipantTable()
        // "Aa" and "BB" have the same String.hashCode()
        table.put(participant("Aa", avatar = ""))
        table.put(participant("BB"))
        assertEquals("", table["Aa"]!!.toParticipant().avatarUrl)
        assertNull(table["BB"]!!.toParticipant().avatarUrl)
        assertEquals("BB", table.remove("BB")!!.toParticipant().sid)
        assertFalse("BB" in table)
        assertTrue("Aa" in table)
        table.clear()
        assertEquals(emptyList<Any>(), table.values())
    }

    @Test
    fun `a frame decodes the same whether or not type comes first`() {
        val data = """{"message":"hi \"there\"","sender":{"sid":"PA_1","userId":"u1","name":"U"},"viaApi":false}"""
        val first = decodeServerFrame("""{"type":"message.received","seq":3,"ts":9,"data":$data}""")
        val last = decodeServerFrame("""{"seq":3,"ts":9,"data":$data,"type":"message.received"}""")
        assertEquals(last, first)
        assertEquals("hi \"there\"", ((first as EventFrame<*>).data as MessageReceivedData).message)
        val unknown = decodeServerFrame("""{"type":"later.thing","x":1}""")
        assertEquals("later.thing", (unknown as UnknownFrame).type)
        val escaped = decodeServerFrame("""{"type":"message\u002ereceived","seq":3,"ts":9,"data":$data}""")
        assertEquals(first, escaped)
    }
}
