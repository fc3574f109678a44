import ConclaveTestSupport
import Foundation
import Logging
import Testing

@testable import ConclaveCapture

/// No camera can be emulated here (no v4l2loopback), so the camera path is tested up to the
/// device: every way a path can fail to be a camera gets its own one-line error, before
/// libavdevice is asked to open anything.
@Suite struct CameraErrorTests {
    let logger = Logger(label: "camera-test")

    private func openError(_ device: String) async -> CaptureError? {
        do {
            _ = try await CameraSource.open(
                CameraRequest(device: device),
                size: VideoSize(width: 640, height: 480),
                frameRate: 30,
                logger: logger
            )
            return nil
        } catch {
            return error
        }
    }

    @Test func aMissingPathIsNoCamera() async throws {
        let error = try #require(await openError("/dev/video-conclave-missing"))
        #expect(error.kind == .missingDevice)
        #expect(error.message == "no camera at /dev/video-conclave-missing")
    }

    @Test func devNullIsNotACaptureDevice() async throws {
        let error = try #require(await openError("/dev/null"))
        #expect(error.kind == .notACaptureDevice)
        #expect(error.message.hasPrefix("/dev/null is not a video capture device"), "\(error)")
    }

    @Test func aRegularFileIsNotACamera() async throws {
        let directory = try TestPaths.temporaryDirectory("camera")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("video0").path
        #expect(FileManager.default.createFile(atPath: file, contents: Data([1, 2, 3])))
        let error = try #require(await openError(file))
        #expect(error.kind == .notACaptureDevice)
        #expect(error.message == "\(file) is not a camera: it is not a device (a regular file or similar)")
        let folder = try #require(await openError(directory.path))
        #expect(folder.message == "\(directory.path) is not a camera: it is a directory")
    }

    @Test func badSizesAndRatesAreRefusedBeforeTheDevice() async throws {
        do {
            _ = try await CameraSource.open(
                CameraRequest(device: "/dev/null"),
                size: VideoSize(width: 641, height: 480),
                frameRate: 30,
                logger: logger
            )
            Issue.record("an odd width was accepted")
        } catch {
            #expect(error.kind == .unsupported)
            #expect(error.message.contains("641x480"), "\(error)")
        }
    }

    /// The catalog lists only capture devices: a folder of look-alike nodes lists nothing, and a
    /// node that cannot be opened is listed with its problem.
    @Test func theCatalogSkipsWhatIsNotACamera() throws {
        let directory = try TestPaths.temporaryDirectory("catalog")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("video0").path, contents: nil))
        #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("videos").path, contents: nil))
        #expect(VideoDeviceCatalog.cameras(directory: directory.path).isEmpty)
        let lines = VideoDeviceCatalog.textLines(cameras: [], screens: [])
        #expect(
            lines == [
                "camera: none found in /dev/video*", "screen: no X display (DISPLAY unset, no /tmp/.X11-unix/X*)",
            ]
        )
    }
}

/// libavdevice's open failures as the lines a user sees (a busy camera cannot be made here).
@Suite struct OpenErrorLineTests {
    @Test func cameraFailures() {
        #expect(
            ConclaveCapture.cameraOpenError(-EBUSY, path: "/dev/video0")
                == CaptureError(.busy, device: "/dev/video0", "camera /dev/video0 is busy: another program is using it")
        )
        #expect(ConclaveCapture.cameraOpenError(-ENODEV, path: "/dev/video0").message == "no camera at /dev/video0")
        #expect(ConclaveCapture.cameraOpenError(-EACCES, path: "/dev/video0").kind == .permissionDenied)
        let other = ConclaveCapture.cameraOpenError(-EIO, path: "/dev/video0")
        #expect(other.kind == .unsupported && other.message.hasPrefix("cannot start camera /dev/video0: "))
    }

    @Test func screenFailures() {
        let region = ScreenRegion(x: 1, y: 2, size: VideoSize(width: 64, height: 48))
        #expect(
            ConclaveCapture.screenOpenError(-EINVAL, display: ":3", region: region).message
                == "the region +1,2,64x48 does not fit on X display :3"
        )
        #expect(ConclaveCapture.screenOpenError(-EIO, display: ":3", region: nil).kind == .unreachableDisplay)
    }
}
