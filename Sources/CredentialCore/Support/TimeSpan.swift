import Secrets

/// "4 min 10 s", "2 h 5 min" — for notices and `status`. Negative spans read "expired … ago".
public enum TimeSpan {
    public static func describe(_ seconds: Int64) -> String {
        if seconds < 0 { return "expired " + span(-seconds) + " ago" }
        return span(seconds)
    }

    /// "expires in 4 min 10 s" / "expired 3 s ago", for a token `seconds` from its expiry.
    public static func expiry(_ seconds: Int64) -> String {
        seconds < 0 ? "expired " + span(-seconds) + " ago" : "expires in " + span(seconds)
    }

    public static func span(_ seconds: Int64) -> String {
        if seconds < 60 { return "\(seconds) s" }
        if seconds < 3600 { return "\(seconds / 60) min \(seconds % 60) s" }
        if seconds < 86400 { return "\(seconds / 3600) h \(seconds % 3600 / 60) min" }
        return "\(seconds / 86400) d \(seconds % 86400 / 3600) h"
    }
}
