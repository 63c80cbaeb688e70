package dev.svc.android.internal

/**
 * The two timestamp forms the library reads, parsed by arithmetic: `java.time` needs API 26 and
 * the library supports API 24 without asking apps for core library desugaring.
 */
internal object Times {
    private val ISO = Regex("""^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$""")
    private val HTTP_DATE = Regex("""^[A-Z][a-z]{2}, (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$""")
    private val MONTHS = listOf("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

    /** An ISO 8601 UTC timestamp as the server writes them (`YYYY-MM-DDThh:mm:ss.sssZ`), in epoch ms; null if not one. */
    fun isoMillis(text: String): Long? {
        val m = ISO.matchEntire(text) ?: return null
        val (y, mo, d, h, mi, s) = m.destructured
        val fraction = m.groupValues[7].padEnd(3, '0').take(3).toInt()
        return epochMillis(y.toInt(), mo.toInt(), d.toInt(), h.toInt(), mi.toInt(), s.toInt())?.plus(fraction)
    }

    /** An HTTP date (IMF-fixdate, `Day, DD Mon YYYY hh:mm:ss GMT`, RFC 9110 §5.6.7), in epoch ms; null if not one. */
    fun httpDateMillis(text: String): Long? {
        val m = HTTP_DATE.matchEntire(text) ?: return null
        val (d, mon, y, h, mi, s) = m.destructured
        val month = MONTHS.indexOf(mon) + 1
        if (month == 0) return null
        return epochMillis(y.toInt(), month, d.toInt(), h.toInt(), mi.toInt(), s.toInt())
    }

    private fun epochMillis(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int): Long? {
        if (month !in 1..12 || day !in 1..daysIn(year, month) || hour > 23 || minute > 59 || second > 60) return null
        val seconds = daysFromCivil(year, month, day) * 86_400L + hour * 3_600L + minute * 60L + second
        return seconds * 1_000L
    }

    private fun daysIn(year: Int, month: Int): Int = when (month) {
        2 -> if (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) 29 else 28
        4, 6, 9, 11 -> 30
        else -> 31
    }

    /** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`). */
    private fun daysFromCivil(year: Int, month: Int, day: Int): Long {
        val y = (if (month <= 2) year - 1 else year).toLong()
        val era = Math.floorDiv(y, 400L)
        val yoe = y - era * 400
        val doy = (153 * (if (month > 2) month - 3 else month + 9) + 2) / 5 + day - 1
        val doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
