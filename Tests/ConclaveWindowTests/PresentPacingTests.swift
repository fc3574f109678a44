import Testing

@testable import ConclaveWindow

/// The window's present pacing, on a clock the test sets (no waiting).
struct PresentPacingTests {
    @Test func presentsAtOnceWhenDirtyAndNothingWasPresented() {
        var pacing = PresentPacing(refreshRate: 60)
        #expect(pacing.decide(dirty: true, now: 5_000) == .present)
    }

    @Test func waitsForTheGuardWhenClean() {
        var pacing = PresentPacing(refreshRate: 60)
        #expect(pacing.decide(dirty: false, now: 5_000) == .wait(milliseconds: PresentPacing.idleWait))
    }

    @Test func coalescesChangesWithinOneRefresh() {
        var pacing = PresentPacing(refreshRate: 60)
        #expect(pacing.interval == 16)
        #expect(pacing.decide(dirty: true, now: 1_000) == .present)
        #expect(pacing.decide(dirty: true, now: 1_001) == .wait(milliseconds: 15))
        #expect(pacing.decide(dirty: true, now: 1_010) == .wait(milliseconds: 6))
        #expect(pacing.decide(dirty: true, now: 1_016) == .present)
        #expect(pacing.decide(dirty: true, now: 1_020) == .wait(milliseconds: 12))
    }

    @Test func ninetyPicturesASecondGiveAtMostOnePresentPerRefresh() {
        var pacing = PresentPacing(refreshRate: 60)
        // Three peers at 30 fps: a picture every 11 ms or so, each marking the window dirty.
        var presents = 0
        var now: UInt64 = 10_000
        for _ in 0..<90 {
            if pacing.decide(dirty: true, now: now) == .present { presents += 1 }
            now += 11
        }
        #expect(presents <= 63)
        #expect(presents >= 45)
    }

    @Test func presentsNoFasterThanTheFastestTilesPicturesPlusAQuarter() {
        var pacing = PresentPacing(refreshRate: 60)
        // Three tiles at 30 fps for a second: 37 presents a second at most, not 60.
        for step in 0...30 {
            pacing.picturesArrived([1: 1, 2: 1, 3: 1], now: 10_000 + UInt64(step) * 34)
        }
        #expect(pacing.interval == 1_000 / 37)
        var presents = 0
        var now: UInt64 = 20_000
        for _ in 0..<90 {  // a picture every 11 ms, as before
            if pacing.decide(dirty: true, now: now) == .present { presents += 1 }
            now += 11
        }
        #expect(presents >= 30 && presents <= 38, "\(presents) presents in a second")
        // One tile at 60 fps: back to the display's refresh.
        for step in 0...61 { pacing.picturesArrived([4: 1], now: 30_000 + UInt64(step) * 17) }
        #expect(pacing.interval == pacing.refreshInterval)
        // Nothing but a slide now and then: the refresh too, so a key press shows at once.
        pacing.picturesArrived([4: 1], now: 40_000)
        pacing.picturesArrived([4: 1], now: 41_100)
        #expect(pacing.interval == pacing.refreshInterval)
    }

    @Test func unknownRefreshRateMeansSixtyHertz() {
        #expect(PresentPacing(refreshRate: 0).refreshInterval == 16)
        #expect(PresentPacing(refreshRate: -3).refreshInterval == 16)
        #expect(PresentPacing(refreshRate: 144).refreshInterval == 6)
        #expect(PresentPacing(refreshRate: 5_000).refreshInterval == 1)
    }

    @Test func aClockGoingBackPresentsRatherThanStalls() {
        var pacing = PresentPacing(refreshRate: 60)
        #expect(pacing.decide(dirty: true, now: 2_000) == .present)
        #expect(pacing.decide(dirty: true, now: 1_000) == .present)
    }
}

/// Which OpenGL renderers the window replaces with SDL's software renderer.
struct SoftwareRasteriserTests {
    @Test func mesaSoftwareRasterisersAreRecognised() {
        #expect(WindowLoop.isSoftwareRasteriser("llvmpipe (LLVM 15.0.6, 256 bits)"))
        #expect(WindowLoop.isSoftwareRasteriser("softpipe"))
        #expect(WindowLoop.isSoftwareRasteriser("Software Rasterizer"))
    }

    @Test func hardwareRenderersAreKept() {
        #expect(!WindowLoop.isSoftwareRasteriser("Mesa Intel(R) UHD Graphics 620 (KBL GT2)"))
        #expect(!WindowLoop.isSoftwareRasteriser("NVIDIA GeForce RTX 3060/PCIe/SSE2"))
        #expect(!WindowLoop.isSoftwareRasteriser("AMD Radeon RX 6600 (navi23, LLVM 15.0.6, DRM 3.49)"))
    }
}
