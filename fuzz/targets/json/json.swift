// JSON.parse on any bytes; for what parses: parse(serialize(v)) == v, and serialize emits no raw
// control bytes (so a serialized value can never break a line-based format). Token members
// (`JSON.secretKeys`, at any depth) are secrets in every parse: read in place (a shared buffer)
// and copied, the parse agrees, and serializeSecret writes the text into a buffer of exactly its
// size (and the same text as serialize when there is no secret).
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

private func holdsSecret(_ v: JSONValue) -> Bool {
    switch v {
    case .secret: return true
    case .array(let a): return a.contains(where: holdsSecret)
    case .object(let o): return o.contains { holdsSecret($0.1) }
    default: return false
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
    let secretText = JSON.serializeSecret(v)
    let text = secretText.unsafeString()
    require(!text.unicodeScalars.contains { $0.value < 0x20 }, "serialized JSON holds a raw control byte")
    require(secretText.count == JSON.serializedCount(v) && secretText.capacity == secretText.count, "serializedCount is not the size")
    if !holdsSecret(v) { require(JSON.serialize(v) == text, "serialize differs from serializeSecret") }
    let again: JSONValue
    do { again = try JSON.parse(text) } catch {
        fuzzFail("serialize produced JSON that does not parse: \(text.debugDescription) (\(error))")
    }
    require(again == v, "parse(serialize(v)) != v for \(text.debugDescription)")
    require(JSON.serializeSecret(again).unsafeString() == text, "serialize is not stable")

    // The same input read in place (tokens are ranges of a shared buffer) and from guarded memory.
    let shared = SecretToken.Buffer(SecretBytes(copying: input))
    let inPlace: JSONValue, copied: JSONValue
    do {
        inPlace = try JSON.parse(sharing: shared)
        copied = try JSON.parse(SecretBytes(copying: input))
    } catch { fuzzFail("the in-place or guarded parse refused what the plain parse took: \(error)") }
    require(inPlace == v && copied == v, "in-place, guarded and plain parses differ")
    return 0
}
