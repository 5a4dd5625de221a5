// swift-tools-version:5.9
// The Swift package of polylock: the Swift that uniffi generates from bindings/uniffi plus the
// hand-written idioms (target Polylock), over the Rust library as a static XCFramework (binary
// target PolylockFFI, whose headers declare the C module `polylockFFI` that the generated Swift
// imports). build-xcframework.sh makes PolylockFFI.xcframework and
// Sources/Polylock/polylock.swift; neither is committed.
import PackageDescription

let package = Package(
    name: "Polylock",
    platforms: [
        .macOS(.v13),
        .iOS(.v16),
    ],
    products: [
        .library(name: "Polylock", targets: ["Polylock"]),
    ],
    targets: [
        .binaryTarget(name: "PolylockFFI", path: "PolylockFFI.xcframework"),
        .target(
            name: "Polylock",
            dependencies: [.target(name: "PolylockFFI")],
            path: "Sources/Polylock"
        ),
    ]
)
