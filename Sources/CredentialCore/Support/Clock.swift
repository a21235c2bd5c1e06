import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock seconds and RFC 3339 UTC text, without Foundation.
public enum Clock {
    public static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }

    public static func monotonicMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// `2026-11-29T14:38:20Z`
    public static func rfc3339(_ seconds: Int64) -> String {
        var t = time_t(seconds)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        let year = Int(tmv.tm_year) + 1900
        if (1000...9999).contains(year) {
            // Twenty bytes written in place: the broker writes two of these per answer.
            return String(unsafeUninitializedCapacity: 20) { b in
                func put(_ value: Int, at: Int, digits: Int) {
                    var v = value
                    for i in (at..<at + digits).reversed() { b[i] = UInt8(48 + v % 10); v /= 10 }
                }
                put(year, at: 0, digits: 4); b[4] = 45
                put(Int(tmv.tm_mon) + 1, at: 5, digits: 2); b[7] = 45
                put(Int(tmv.tm_mday), at: 8, digits: 2); b[10] = 84
                put(Int(tmv.tm_hour), at: 11, digits: 2); b[13] = 58
                put(Int(tmv.tm_min), at: 14, digits: 2); b[16] = 58
                put(Int(tmv.tm_sec), at: 17, digits: 2); b[19] = 90
                return 20
            }
        }
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(tmv.tm_year + 1900)-\(two(tmv.tm_mon + 1))-\(two(tmv.tm_mday))T\(two(tmv.tm_hour)):\(two(tmv.tm_min)):\(two(tmv.tm_sec))Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`; returns Unix seconds.
    public static func parseRFC3339(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20 else { return nil }
        func num(_ r: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for i in r { guard b[i] >= 48 && b[i] <= 57 else { return nil }; v = v * 10 + Int64(b[i] - 48) }
            return v
        }
        guard b[4] == 45, b[7] == 45, b[10] == 84 || b[10] == 116 || b[10] == 32, b[13] == 58, b[16] == 58,
              let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10),
              let h = num(11..<13), let mi = num(14..<16), let s = num(17..<19),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var i = 19
        if i < b.count, b[i] == 46 {
            i += 1
            let start = i
            while i < b.count, b[i] >= 48 && b[i] <= 57 { i += 1 }
            guard i > start else { return nil }
        }
        guard i < b.count else { return nil }
        var offset: Int64 = 0
        if b[i] == 90 || b[i] == 122 {
            i += 1
        } else if b[i] == 43 || b[i] == 45 {
            guard i + 6 == b.count, b[i + 3] == 58, let oh = num(i + 1..<i + 3), let om = num(i + 4..<i + 6) else { return nil }
            offset = (oh * 3600 + om * 60) * (b[i] == 43 ? 1 : -1)
            i += 6
        } else { return nil }
        guard i == b.count else { return nil }
        // Days from civil (Howard Hinnant's algorithm).
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        return days * 86400 + h * 3600 + mi * 60 + s - offset
    }
}
