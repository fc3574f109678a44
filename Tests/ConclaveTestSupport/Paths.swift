import Foundation

/// Well-known locations for tests: the package root, its build products and its Python venv.
public enum TestPaths {
    /// The package root, found from this source file's location.
    public static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        // .../Tests/ConclaveTestSupport/Paths.swift -> package root
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }()

    /// The Python interpreter with aiortc and cryptography: `$CONCLAVE_PYTHON`, else `.venv` at the
    /// package root (made by `scripts/setup`). Throws with a clear message when neither exists, so a
    /// test that needs the interop peers fails instead of skipping.
    public static func python() throws -> String {
        if let configured = ProcessInfo.processInfo.environment["CONCLAVE_PYTHON"] { return configured }
        let venv = packageRoot.appendingPathComponent(".venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: venv) else {
            throw SubprocessError(description: "no Python venv at \(venv): run scripts/setup")
        }
        return venv
    }

    /// The directory holding the built executables (`conclave`, `conclave-testbed`) of this build.
    ///
    /// The test bundle lives next to them (`.build/debug/ConclavePackageTests.xctest`).
    public static var productsDirectory: URL {
        let bundle = Bundle.main.bundleURL
        if bundle.pathExtension == "xctest" { return bundle.deletingLastPathComponent() }
        for candidate in Bundle.allBundles where candidate.bundleURL.pathExtension == "xctest" {
            return candidate.bundleURL.deletingLastPathComponent()
        }
        return packageRoot.appendingPathComponent(".build/debug")
    }

    /// A fresh temporary directory, removed by the caller (or left for inspection on failure).
    public static func temporaryDirectory(_ prefix: String = "conclave-test") throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The built `conclave` binary of this build; throws (failing the test, never skipping it)
    /// when it was not built.
    public static func conclave() throws -> String {
        let path = productsDirectory.appendingPathComponent("conclave").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw SubprocessError(description: "no conclave binary at \(path): run swift build first")
        }
        return path
    }
}
