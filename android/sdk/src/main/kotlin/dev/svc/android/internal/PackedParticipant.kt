package dev.svc.android.internal

import dev.svc.android.SvcParticipant

/**
 * A participant record as a [dev.svc.android.Room] keeps it: every text field in one UTF-8 array instead
 * of a `String` and its byte array each, turned back into a [SvcParticipant] when read. Every connected
 * client holds one record per participant of its room, so records are most of a client's memory in a
 * large room; reads (an event's sender, a listing) are rare by comparison.
 */
internal class PackedParticipant private constructor(
    /** sid, userId, name, avatarUrl (empty when null) and joinedAt, one after the other. */
    private val text: ByteArray,
    private val sidEnd: Int,
    private val userIdEnd: Int,
    private val nameEnd: Int,
    /** Where avatarUrl ends; the sign bit says the participant has one. */
    private val avatarEnd: Int,
    /** [HOST] and [CONNECTED]. */
    private val flags: Int,
    /** The sid's `String.hashCode()`. */
    val sidHash: Int,
) {
    val isHost: Boolean get() = flags and HOST != 0

    /** Whether this is the record of [sid] (whose hash is [hash]). */
    fun hasSid(sid: String, hash: Int): Boolean {
        if (hash != sidHash) return false
        val bytes = sid.toByteArray(Charsets.UTF_8)
        if (bytes.size != sidEnd) return false
        for (i in bytes.indices) if (bytes[i] != text[i]) return false
        return true
    }

    fun toParticipant(): SvcParticipant {
        val end = avatarEnd and Int.MAX_VALUE
        return SvcParticipant(
            sid = String(text, 0, sidEnd, Charsets.UTF_8),
            userId = String(text, sidEnd, userIdEnd - sidEnd, Charsets.UTF_8),
            name = String(text, userIdEnd, nameEnd - userIdEnd, Charsets.UTF_8),
            avatarUrl = if (avatarEnd < 0) String(text, nameEnd, end - nameEnd, Charsets.UTF_8) else null,
            isHost = flags and HOST != 0,
            joinedAt = String(text, end, text.size - end, Charsets.UTF_8),
            connected = flags and CONNECTED != 0,
        )
    }

    companion object {
        private const val HOST = 1
        private const val CONNECTED = 2

        fun of(p: SvcParticipant): PackedParticipant {
            val fields = listOf(p.sid, p.userId, p.name, p.avatarUrl ?: "", p.joinedAt).map { it.toByteArray(Charsets.UTF_8) }
            val text = ByteArray(fields.sumOf { it.size })
            val ends = IntArray(fields.size)
            var at = 0
            fields.forEachIndexed { i, bytes ->
                bytes.copyInto(text, at)
                at += bytes.size
                ends[i] = at
            }
            return PackedParticipant(
                text,
                ends[0],
                ends[1],
                ends[2],
                if (p.avatarUrl != null) ends[3] or Int.MIN_VALUE else ends[3],
                (if (p.isHost) HOST else 0) or (if (p.connected) CONNECTED else 0),
                p.sid.hashCode(),
            )
        }
    }
}

/**
 * A room's participants by sid, in join order: an open-addressing index (linear probing) over the records
 * plus the records in order, so a participant costs its record and two array slots, no map entry and no
 * key string of its own. Not thread-safe: the room guards it.
 */
internal class ParticipantTable {
    private var slots = arrayOfNulls<PackedParticipant>(INITIAL_SLOTS)
    private val order = ArrayList<PackedParticipant>()

    operator fun contains(sid: String): Boolean = find(sid) >= 0

    operator fun get(sid: String): PackedParticipant? = find(sid).let { if (it < 0) null else slots[it] }

    fun values(): List<PackedParticipant> = order.toList()

    /** Adds or replaces [p]'s record (a replaced one keeps its place in the order). */
    fun put(p: SvcParticipant) {
        val record = PackedParticipant.of(p)
        val at = find(p.sid)
        if (at >= 0) {
            order[order.indexOf(slots[at])] = record
            slots[at] = record
            return
        }
        if ((order.size + 1) * 2 > slots.size) resize(slots.size * 2)
        insert(record)
        order.add(record)
    }

    fun remove(sid: String): PackedParticipant? {
        var at = find(sid)
        if (at < 0) return null
        val removed = slots[at]!!
        order.remove(removed)
        slots[at] = null
        // Backward-shift deletion: move later records of the probe run into the hole they may need.
        val mask = slots.size - 1
        var next = (at + 1) and mask
        while (true) {
            val r = slots[next] ?: break
            val home = r.sidHash.spread() and mask
            // r may fill the hole when its home is not cyclically within (at, next]
            if (((next - home) and mask) >= ((next - at) and mask)) {
                slots[at] = r
                slots[next] = null
                at = next
            }
            next = (next + 1) and mask
        }
        return removed
    }

    fun clear() {
        slots = arrayOfNulls(INITIAL_SLOTS)
        order.clear()
    }

    private fun find(sid: String): Int {
        val hash = sid.hashCode()
        val mask = slots.size - 1
        var i = hash.spread() and mask
        while (true) {
            val r = slots[i] ?: return -1
            if (r.hasSid(sid, hash)) return i
            i = (i + 1) and mask
        }
    }

    private fun insert(record: PackedParticipant) {
        val mask = slots.size - 1
        var i = record.sidHash.spread() and mask
        while (slots[i] != null) i = (i + 1) and mask
        slots[i] = record
    }

    private fun resize(capacity: Int) {
        val old = slots
        slots = arrayOfNulls(capacity)
        for (r in old) if (r != null) insert(r)
    }

    private companion object {
        const val INITIAL_SLOTS = 8

        /** Mixes the high bits in, as `HashMap` does. */
        fun Int.spread(): Int = this xor (this ushr 16)
    }
}
