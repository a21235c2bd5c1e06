// JSON.parse on any bytes; for what parses: parse(serialize(v)) == v, and serialize emits no raw
// control bytes (so a serialized value can never break a line-based format). The secret parse
// (token members into guarded memory, in place and copied) agrees, and serializeSecret writes the
// same text into a buffer of exactly its size.
@testable import CredentialCore
import FuzzSupport
import Secrets

private func depth(_ v: JSONValue) -> Int {
    switch v {
    case .array(let a): return 1 + (a.map(depth).max() ?? 0)
    case .object(let o): return 1 + (o.map { depth($0.1) }.max() ?? 0)
    default: return 1
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let v: JSONValue
    do { v = try JSON.parse(input) } catch let e as JSONError {
        require(e.offset >= 0 && e.offset <= input.count, "error offset \(e.offset) outside the input")
        return 0
    } catch { fuzzFail("JSON.parse threw \(error)") }
    require(depth(v) <= JSON.maxDepth, "nesting deeper than maxDepth")
    let text = JSON.serialize(v)
    require(!text.unicodeScalars.contains { $0.value < 0x20 }, "serialized JSON holds a raw control byte")
    let again: JSONValue
    do { again = try JSON.parse(text) } catch {
        fuzzFail("serialize produced JSON that does not parse: \(text.debugDescription) (\(error))")
    }
    require(again == v, "parse(serialize(v)) != v for \(text.debugDescription)")
    require(JSON.serialize(again) == text, "serialize is not stable")

    // The same input with token members (`secretKeys`, at any depth) read into guarded memory,
    // in place and copied: it parses exactly when the plain parse does, and writes the same text.
    let keys: Set<String> = ["a", "b", "access_token", "refresh_token", "id_token", ""]
    let shared = SecretToken.Buffer(SecretBytes(copying: input))
    let inPlace: JSONValue, copied: JSONValue
    do {
        inPlace = try JSON.parse(sharing: shared, secretKeys: keys)
        copied = try input.withUnsafeBytes { try JSON.parse($0, secretKeys: keys) }
    } catch { fuzzFail("the secret parse refused what the plain parse took: \(error)") }
    require(inPlace == copied, "in-place and copied secret parses differ")
    let secretText = JSON.serializeSecret(inPlace)
    require(secretText.unsafeString() == text, "serializeSecret differs from serialize: \(secretText.unsafeString().debugDescription)")
    require(secretText.count == JSON.serializedCount(inPlace) && secretText.capacity == secretText.count, "serializedCount is not the size")
    return 0
}
