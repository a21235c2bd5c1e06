// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "chatgpt-credential",
    products: [
        .executable(name: "chatgpt-credential", targets: ["chatgpt-credential"]),
        .library(name: "ChatGPTCredential", targets: ["ChatGPTCredential"]),
    ],
    targets: [
        // Thin C modules over system libraries (swift-nio's CNIO* style).
        .systemLibrary(name: "CLibSecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // libc calls Swift cannot make directly (prctl is variadic).
        .target(name: "CSystemShims"),
        // dlopen()s libcurl.so.4 on first request; links no libcurl, so `get` of a fresh token
        // never loads the network stack.
        .target(name: "CCurlShim"),
        // All behaviour lives here; no printing, no exit().
        .target(
            name: "ChatGPTCredential",
            dependencies: ["CLibSecret", "CSodium", "CSystemShims", "CCurlShim"]
        ),
        // argv -> Invocation -> run -> exit code.
        .executableTarget(
            name: "chatgpt-credential",
            dependencies: ["ChatGPTCredential", "CSystemShims"]
        ),
        .testTarget(
            name: "ChatGPTCredentialTests",
            dependencies: ["ChatGPTCredential"],
            exclude: ["age-cctv"] // C2SP age vectors, read at run time via #filePath
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["ChatGPTCredential", "chatgpt-credential"]
        ),
    ],
    swiftLanguageModes: [.v5]
)
