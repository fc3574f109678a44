// swift-tools-version:6.2
import PackageDescription

// Conclave: end-to-end encrypted group calls through a Janus VideoRoom, and their recording.
//
// Layout (see README "Repository organization"):
// - one `.systemLibrary` target per C library, each with one C shim target for its macros and variadics;
// - pure-Swift, I/O-free protocol modules (Janus messages, SDP, RTP/RTCP, E2EE);
// - thin wrapper modules that each own one C library;
// - the peer connection, the call and the application's file formats, and the `conclave` executable.

/// A system library found with pkg-config and installed from Debian's packages.
func system(_ name: String, _ pkgConfig: String, _ apt: String) -> Target {
    .systemLibrary(name: name, pkgConfig: pkgConfig, providers: [.apt([apt])])
}

let package = Package(
    name: "Conclave",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "conclave", targets: ["conclave"]),
        .executable(name: "conclave-testbed", targets: ["conclave-testbed"]),
        .library(name: "Conclave", targets: ["ConclavePeerConnection", "ConclaveCall", "ConclaveFormats"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.0.0"),
    ],
    targets: [
        // MARK: C libraries
        system("CWebSockets", "libwebsockets", "libwebsockets-dev"),
        system("CNice", "nice", "libnice-dev"),
        system("COpenSSL", "openssl", "libssl-dev"),
        system("CSRTP", "libsrtp2", "libsrtp2-dev"),
        system("COpus", "opus", "libopus-dev"),
        system("CVPX", "vpx", "libvpx-dev"),
        system("COpenH264", "openh264", "libopenh264-dev"),
        system("CFFmpeg", "libavformat", "libavformat-dev"),
        system("CFFmpegFilter", "libavfilter", "libavfilter-dev"),
        system("CFFmpegDevice", "libavdevice", "libavdevice-dev"),
        system("CSDL2", "sdl2", "libsdl2-dev"),
        system("CSDL2TTF", "SDL2_ttf", "libsdl2-ttf-dev"),
        // A C++ library: reached only through the C API of CWebRTCAudioProcessingShims.
        system("CWebRTCAudioProcessing", "webrtc-audio-processing", "libwebrtc-audio-processing-dev"),
        system("CPulse", "libpulse", "libpulse-dev"),
        // One shim target per C library (macros and variadics only), imported by that library's
        // wrapper alone.
        .target(name: "CWebSocketsShims", dependencies: ["CWebSockets"]),
        .target(name: "CNiceShims", dependencies: ["CNice"], cSettings: [.define("_GNU_SOURCE")]),
        .target(name: "COpenSSLShims", dependencies: ["COpenSSL"]),
        .target(name: "CSRTPShims", dependencies: ["CSRTP"]),
        .target(name: "COpusShims", dependencies: ["COpus"]),
        .target(name: "CVPXShims", dependencies: ["CVPX"]),
        .target(name: "COpenH264Shims", dependencies: ["COpenH264"]),
        .target(name: "CFFmpegShims", dependencies: ["CFFmpeg"]),
        .target(name: "CFFmpegFilterShims", dependencies: ["CFFmpegFilter"]),
        .target(name: "CFFmpegDeviceShims", dependencies: ["CFFmpegDevice"]),
        // C++: a C API over webrtc::AudioProcessing (create, 10 ms frames each way, delay, destroy).
        // SwiftPM passes the library's include path from pkg-config but not its defines, hence them.
        .target(
            name: "CWebRTCAudioProcessingShims",
            dependencies: ["CWebRTCAudioProcessing"],
            cxxSettings: [.define("WEBRTC_POSIX"), .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD")]
        ),

        // MARK: Pure Swift, I/O-free
        .target(name: "ConclaveCore"),
        // Owner-only files and folders (keys, recordings), non-blocking checked reads: POSIX only.
        .target(name: "ConclaveFiles"),
        .target(name: "JanusProtocol"),
        // STOMP 1.2 frames: encoding, a bounded decoder for WebSocket text messages.
        .target(name: "STOMPProtocol"),
        // Recorder jobs and events, their JSON and the broker destinations they travel on.
        .target(name: "RecorderJobs", dependencies: ["ECallSignaling"]),
        .target(name: "ConclaveSDP", dependencies: ["ConclaveCore"]),
        .target(name: "ConclaveRTP", dependencies: ["ConclaveCore"]),
        .target(
            name: "ConclaveE2EE",
            dependencies: [
                // Frame AES-256-GCM goes through the FrameCipher protocol: swift-crypto by default,
                // OpenSSL's kept context from ConclaveOpenSSL where calls are composed.
                "ConclaveCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // ECall's signaling messages, their signatures and the call key's lifecycle (sans-IO).
        .target(name: "ECallSignaling", dependencies: ["ConclaveE2EE"]),

        // MARK: Wrappers, one C library each
        // A text WebSocket client (any subprotocol) on a libwebsockets thread of its own.
        .target(
            name: "ConclaveWebSocket",
            dependencies: ["CWebSockets", "CWebSocketsShims", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "JanusClient",
            dependencies: ["JanusProtocol", "ConclaveWebSocket", .product(name: "Logging", package: "swift-log")]
        ),
        // STOMP over WebSocket: a sans-IO client core, its shell, and the call layer's signaling channel.
        .target(
            name: "STOMPClient",
            dependencies: ["STOMPProtocol", "ConclaveWebSocket", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "ConclaveICE",
            dependencies: [
                "ConclaveCore", "ConclaveSDP", "CNice", "CNiceShims", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // OpenSSL's one owner: DTLS and the AES-256-GCM frame cipher.
        .target(
            name: "ConclaveOpenSSL",
            dependencies: [
                "ConclaveE2EE", "COpenSSL", "COpenSSLShims", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "ConclaveSRTP", dependencies: ["CSRTP", "CSRTPShims"]),
        .target(name: "ConclaveOpus", dependencies: ["ConclaveCore", "COpus", "COpusShims"]),
        .target(name: "ConclaveVPX", dependencies: ["ConclaveCore", "CVPX", "CVPXShims"]),
        .target(name: "ConclaveOpenH264", dependencies: ["ConclaveCore", "COpenH264", "COpenH264Shims"]),
        .target(name: "ConclaveAV", dependencies: ["ConclaveCore", "CFFmpeg", "CFFmpegShims"]),
        .target(
            name: "ConclaveKeyStore",
            dependencies: ["ConclaveE2EE", "ConclaveFiles"]
        ),

        .target(
            name: "ConclaveRecorder",
            dependencies: [
                "ConclaveCore", "ConclaveAV", "ConclaveRTP", "ConclaveFiles",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // One file of a whole recorded call: composite video and mixed audio on libavfilter, read
        // from a recording folder's files and manifest.
        .target(
            name: "ConclaveCompose",
            dependencies: [
                "ConclaveCore", "ConclaveRecorder", "ConclaveAV", "ConclaveFiles", "CFFmpegFilter",
                "CFFmpegFilterShims",
            ]
        ),

        // The call window: SDL2 (and SDL2_ttf for the name labels) owned by one thread.
        .target(name: "ConclaveWindow", dependencies: ["ConclaveCore", "CSDL2", "CSDL2TTF"]),
        // Live call audio: per-participant playout buffers (jitter, FEC, PLC), the mixer, levels.
        .target(name: "ConclaveAudio", dependencies: ["ConclaveCore", "ConclaveOpus"]),
        // The microphone's echo cancellation, noise suppression and gain (webrtc-audio-processing).
        .target(name: "ConclaveAudioProcessing", dependencies: ["ConclaveCore", "CWebRTCAudioProcessingShims"]),

        // MARK: Composition
        .target(
            name: "ConclaveMedia",
            dependencies: ["ConclaveCore", "ConclaveOpus", "ConclaveVPX", "ConclaveOpenH264", "ConclaveAV"]
        ),
        // Cameras (V4L2) and screens (x11grab) through libavdevice, each on a capture thread of its
        // own, as ConclaveMedia video sources; and the catalog of both.
        .target(
            name: "ConclaveCapture",
            dependencies: [
                "ConclaveCore", "ConclaveMedia", "CFFmpegDevice", "CFFmpegDeviceShims",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // PulseAudio's one owner: the connection on its own thread, devices, microphone, playback.
        .target(name: "ConclavePulse", dependencies: ["CPulse", "ConclaveCore", "ConclaveMedia"]),
        // The peer connection: ICE + DTLS + SRTP and the media clock, with no Janus in it.
        .target(
            name: "ConclavePeerConnection",
            dependencies: [
                "ConclaveCore", "ConclaveOpenSSL", "ConclaveICE", "ConclaveRTP", "ConclaveSDP", "ConclaveSRTP",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // VideoRoom publisher and subscriber, room subscription, call session, media pipelines,
        // status and the recording session.
        .target(
            name: "ConclaveCall",
            dependencies: [
                "ConclavePeerConnection", "ConclaveCore", "ConclaveOpenSSL", "ConclaveE2EE", "ConclaveMedia",
                "ConclaveOpus", "ConclaveRTP", "ConclaveRecorder", "ConclaveSDP", "JanusClient", "JanusProtocol",
                "ConclaveKeyStore", "ECallSignaling", "STOMPClient", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The application's own files: configuration and invitations.
        .target(
            name: "ConclaveFormats",
            dependencies: ["ConclaveCore", "ConclaveE2EE", "ConclaveFiles", "ConclaveICE"]
        ),
        // An in-memory Janus behind a JanusTransport, for fast tests of the client and the call layer.
        .target(name: "JanusTesting", dependencies: ["JanusClient", "JanusProtocol"]),
        // An in-memory broker that routes signaling messages by device id, for tests of the call's keys.
        .target(name: "SignalingTesting", dependencies: ["ConclaveCall"]),
        .target(
            name: "JanusTestBed",
            dependencies: ["JanusClient", "JanusProtocol", .product(name: "Logging", package: "swift-log")]
        ),
        // A private RabbitMQ with Web-STOMP on loopback, from config/rabbitmq.
        .target(name: "RabbitMQTestBed", dependencies: [.product(name: "Logging", package: "swift-log")]),
        // `conclave recorder serve`: record jobs from the broker's queue, as `record` records a call.
        .target(
            name: "ConclaveRecorderService",
            dependencies: [
                "ConclaveCall", "ConclaveE2EE", "ConclaveFiles", "ConclavePeerConnection", "ConclaveRecorder",
                "ECallSignaling", "JanusClient", "RecorderJobs", "STOMPClient", "STOMPProtocol",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Simulated publishers and calls (pattern + tone, encoded for real) recorded through CallRecorder:
        // recording folders for the recorder's and the composer's tests, conclave-testbed and bench/compose.
        .target(
            name: "RecordingTestBed",
            dependencies: [
                "ConclaveCore", "ConclaveMedia", "ConclaveOpus", "ConclaveRTP", "ConclaveRecorder",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "conclave",
            dependencies: [
                "ConclaveCall", "ConclaveFormats", "ConclavePeerConnection", "ConclaveCore", "JanusProtocol",
                "JanusClient", "ConclaveE2EE", "ConclaveKeyStore", "ConclaveMedia", "ConclaveRecorder", "ConclaveFiles",
                "ConclaveICE", "ECallSignaling", "STOMPClient", "STOMPProtocol", "RecorderJobs",
                "ConclaveRecorderService", "ConclaveCompose", "ConclaveCapture", "ConclaveWindow", "ConclaveAV",
                "ConclavePulse", "ConclaveOpus", "ConclaveAudio", "ConclaveAudioProcessing",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "conclave-testbed",
            dependencies: [
                "JanusTestBed", "RabbitMQTestBed", "RecordingTestBed",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Benchmarks (bench/<name>/main.swift, run through bench/<name>/run)
        .executableTarget(
            name: "bench-e2ee",
            dependencies: [
                "ConclaveE2EE", "ConclaveOpenSSL", "ConclaveCore", .product(name: "Logging", package: "swift-log"),
            ],
            path: "bench/e2ee/Sources"
        ),
        .executableTarget(
            name: "bench-codecs",
            dependencies: [
                "ConclaveMedia", "ConclaveOpus", "ConclaveVPX", "ConclaveOpenH264", "ConclaveCore",
            ],
            path: "bench/codecs/Sources"
        ),
        .executableTarget(
            name: "bench-janus-signaling",
            dependencies: ["JanusClient", "JanusProtocol", "JanusTestBed"],
            path: "bench/janus-signaling/Sources"
        ),

        .executableTarget(
            name: "bench-signaling",
            dependencies: [
                "STOMPClient", "RabbitMQTestBed", "ConclaveCall", "ConclaveCore", "ConclaveE2EE", "ECallSignaling",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "bench/signaling/Sources"
        ),
        .executableTarget(
            name: "bench-transport",
            dependencies: [
                "ConclaveCall", "ConclavePeerConnection", "ConclaveCore", "ConclaveICE", "ConclaveMedia",
                "ConclaveSRTP",
                "JanusClient", "JanusProtocol", "JanusTestBed", .product(name: "Logging", package: "swift-log"),
            ],
            path: "bench/transport/Sources"
        ),
        .executableTarget(
            name: "bench-recorder",
            dependencies: [
                "ConclaveCall", "ConclaveCore", "ConclaveE2EE", "ConclaveOpenSSL", "ConclaveMedia", "ConclaveRecorder",
                "JanusClient",
                "JanusProtocol", "JanusTestBed", .product(name: "Logging", package: "swift-log"),
            ],
            path: "bench/recorder/Sources"
        ),

        .executableTarget(
            name: "bench-fleet",
            dependencies: [
                "JanusClient", "JanusTestBed", "RabbitMQTestBed", "RecorderJobs", "STOMPClient", "STOMPProtocol",
            ],
            path: "bench/fleet/Sources"
        ),

        .executableTarget(
            name: "bench-compose",
            dependencies: ["ConclaveCompose", "ConclaveCore", "RecordingTestBed"],
            path: "bench/compose/Sources"
        ),

        // MARK: Tests, mirroring the targets
        .target(
            name: "ConclaveTestSupport",
            dependencies: ["JanusTestBed", "ConclaveAV", "ConclaveCore", "ConclaveMedia", "ConclaveOpus"],
            path: "Tests/ConclaveTestSupport"
        ),
        .testTarget(
            name: "ConclaveComposeTests",
            dependencies: [
                "ConclaveCompose", "ConclaveRecorder", "ConclaveAV", "ConclaveOpus", "ConclaveCore", "ConclaveMedia",
                "ConclaveTestSupport", "RecordingTestBed",
            ]
        ),
        .testTarget(
            name: "ConclaveCaptureTests",
            dependencies: [
                "ConclaveCapture", "ConclaveCore", "ConclaveMedia", "ConclaveTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ConclaveWindowTests",
            dependencies: ["ConclaveWindow", "ConclaveCore", "ConclaveMedia", "ConclaveTestSupport"]
        ),
        .testTarget(
            name: "ConclavePulseTests",
            dependencies: ["ConclavePulse", "ConclaveCore", "ConclaveMedia", "ConclaveTestSupport"]
        ),
        .testTarget(name: "ConclaveCoreTests", dependencies: ["ConclaveCore", "ConclaveTestSupport"]),
        .testTarget(name: "ConclaveAudioTests", dependencies: ["ConclaveAudio", "ConclaveCore", "ConclaveOpus"]),
        .testTarget(name: "ConclaveAudioProcessingTests", dependencies: ["ConclaveAudioProcessing", "ConclaveCore"]),
        .testTarget(name: "JanusProtocolTests", dependencies: ["JanusProtocol", "ConclaveTestSupport"]),
        .testTarget(name: "STOMPProtocolTests", dependencies: ["STOMPProtocol", "ConclaveTestSupport"]),
        .testTarget(
            name: "RecorderServiceTests",
            dependencies: [
                "ConclaveRecorderService", "ConclaveCall", "ConclaveCore", "ConclaveE2EE", "ConclaveMedia",
                "ConclaveOpenSSL", "ConclaveOpus", "ConclaveRecorder", "ConclaveTestSupport", "ECallSignaling",
                "JanusClient",
                "JanusProtocol", "JanusTestBed", "RabbitMQTestBed", "RecorderJobs", "STOMPClient", "STOMPProtocol",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RecorderJobsTests",
            dependencies: [
                "RecorderJobs", "ECallSignaling", "STOMPClient", "STOMPProtocol", "RabbitMQTestBed",
                "ConclaveTestSupport", "ConclaveE2EE", "ConclaveKeyStore", "ConclaveRecorderService",
            ]
        ),
        .testTarget(
            name: "STOMPClientTests",
            dependencies: ["STOMPClient", "STOMPProtocol", "RabbitMQTestBed", "ConclaveTestSupport"]
        ),
        .testTarget(
            name: "JanusClientTests",
            dependencies: ["JanusClient", "JanusProtocol", "JanusTestBed", "JanusTesting", "ConclaveTestSupport"]
        ),
        .testTarget(name: "ConclaveSDPTests", dependencies: ["ConclaveSDP", "ConclaveCore", "ConclaveTestSupport"]),
        .testTarget(name: "ConclaveRTPTests", dependencies: ["ConclaveRTP", "ConclaveCore", "ConclaveTestSupport"]),
        .testTarget(
            name: "ConclaveE2EETests",
            dependencies: [
                "ConclaveE2EE", "ConclaveCore", "ConclaveTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ECallSignalingTests",
            dependencies: ["ECallSignaling", "ConclaveE2EE", "ConclaveCore", "ConclaveTestSupport"]
        ),
        .testTarget(name: "ConclaveKeyStoreTests", dependencies: ["ConclaveKeyStore", "ConclaveE2EE"]),
        .testTarget(name: "ConclaveFilesTests", dependencies: ["ConclaveFiles", "ConclaveTestSupport"]),
        .testTarget(
            name: "ConclaveICETests",
            dependencies: [
                "ConclaveICE", "ConclaveCore", "ConclaveTestSupport", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ConclaveOpenSSLTests",
            dependencies: [
                "ConclaveOpenSSL", "ConclaveE2EE", "ConclaveCore", "ConclaveSRTP", "ConclaveICE", "ConclaveTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ConclaveMediaTests",
            dependencies: [
                "ConclaveMedia", "ConclaveOpus", "ConclaveVPX", "ConclaveOpenH264", "ConclaveAV", "ConclaveCore",
                "ConclaveTestSupport",
            ]
        ),
        .testTarget(
            name: "ConclaveCLITests",
            dependencies: [
                "ConclaveTestSupport", "JanusTestBed", "RabbitMQTestBed", "STOMPClient", "ConclaveWindow",
                "ConclaveCore",
                "ConclaveMedia",
            ]
        ),
        .testTarget(
            name: "ConclaveCallTests",
            dependencies: [
                "ConclaveCall", "ConclaveFormats", "ConclavePeerConnection", "ConclaveCore", "ConclaveE2EE",
                "ConclaveMedia", "ConclaveAV", "ConclaveVPX", "ConclaveOpenH264", "ConclaveOpus", "ConclaveRTP",
                "JanusClient",
                "JanusProtocol", "JanusTestBed", "JanusTesting", "ConclaveTestSupport", "ECallSignaling",
                "SignalingTesting", "ConclaveKeyStore", "ConclaveRecorder", "RabbitMQTestBed", "STOMPClient",
                "ConclaveWindow", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ConclavePeerConnectionTests",
            dependencies: [
                "ConclavePeerConnection", "ConclaveCore", "ConclaveRTP", "ConclaveSDP",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ConclaveFormatsTests",
            dependencies: ["ConclaveFormats", "ConclaveCore", "ConclaveE2EE", "ConclaveTestSupport"]
        ),
        .testTarget(
            name: "ConclaveRecorderTests",
            dependencies: [
                "ConclaveRecorder", "ConclaveCall", "ConclaveCore", "ConclaveE2EE", "ConclaveOpenSSL", "ConclaveMedia",
                "ConclaveAV",
                "ConclaveOpus", "ConclaveRTP", "JanusClient", "JanusProtocol", "ConclaveTestSupport",
                "RecordingTestBed",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Headless Chromium in the call (web/ driven over DevTools), against `conclave` itself.
        .testTarget(
            name: "BrowserInteropTests",
            dependencies: ["ConclaveTestSupport", "ConclaveMedia", "ConclaveCore", "ConclaveE2EE", "JanusTestBed"]
        ),
    ]
)

for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    target.swiftSettings = settings
}
