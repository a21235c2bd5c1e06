// swift-tools-version:6.0
import PackageDescription

// libsecret's and glib's header directories (what `pkg-config --cflags libsecret-1` says on Debian
// and Fedora, x86_64 and aarch64; a missing -I directory is harmless). CLibSecret deliberately has
// no `pkgConfig:`, because SwiftPM would then also add pkg-config's `-lsecret-1 -lglib-2.0 ...`,
// and a binary that links libsecret pays for it at EVERY start: the dynamic loader maps and
// relocates glib, gobject, gio and gcrypt and runs their constructors (~1.6 ms and ~4 MB RSS,
// measured on a C `int main(){}`), even for a `get` that only reads the encrypted file.
// `-Xlinker --as-needed` cannot help: SwiftPM puts user linker flags after the `-l` flags.
// So the headers are found through these flags and CLibSecretLoader dlopen()s libsecret on the
// first Secret Service call.
let libsecretIncludes = [
    "/usr/include/libsecret-1", "/usr/include/glib-2.0",
    "/usr/lib/x86_64-linux-gnu/glib-2.0/include", "/usr/lib/aarch64-linux-gnu/glib-2.0/include",
    "/usr/lib64/glib-2.0/include", "/usr/lib/glib-2.0/include",
]

let package = Package(
    name: "chatgpt-credential",
    products: [
        .executable(name: "chatgpt-credential", targets: ["chatgpt-credential"]),
        .library(name: "ChatGPTCredential", targets: ["ChatGPTCredential"]),
    ],
    targets: [
        // Thin C modules over system libraries (swift-nio's CNIO* style).
        // Headers only: no link directive, no pkgConfig (see libsecretIncludes above).
        .systemLibrary(name: "CLibSecret", providers: [.apt(["libsecret-1-dev"])]),
        // dlopen()s libsecret-1.so.0 on the first Secret Service call and resolves the ccred_*
        // pointers declared in CLibSecret/shim.h.
        .target(
            name: "CLibSecretLoader",
            dependencies: ["CLibSecret"],
            cSettings: [.unsafeFlags(libsecretIncludes.map { "-I" + $0 })]
        ),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // libc calls Swift cannot make directly (prctl is variadic).
        .target(name: "CSystemShims"),
        // dlopen()s libcurl.so.4 on first request; links no libcurl, so `get` of a fresh token
        // never loads the network stack.
        .target(name: "CCurlShim"),
        // All behaviour lives here; no printing, no exit().
        .target(
            name: "ChatGPTCredential",
            dependencies: ["CLibSecret", "CLibSecretLoader", "CSodium", "CSystemShims", "CCurlShim"],
            swiftSettings: [.unsafeFlags(libsecretIncludes.flatMap { ["-Xcc", "-I" + $0] })]
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
