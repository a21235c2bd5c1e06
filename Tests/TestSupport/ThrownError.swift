import CredentialCore

/// The `CredentialError` that `body` throws; nil when it throws nothing or another error. For
/// expectations that name what they expect of it (its exit code, its case) where the message
/// carries a path or a value made at run time.
public func thrownCredentialError(_ body: () throws -> Void) -> CredentialError? {
    do { try body() } catch let e as CredentialError { return e } catch { return nil }
    return nil
}
