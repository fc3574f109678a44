internal import CSDL2
internal import CSDL2TTF
import ConclaveCore

#if canImport(Glibc)
    import Glibc
#endif

/// The font of the name labels and indicators: DejaVu Sans, the font the composite recording
/// draws names with (Debian's fonts-dejavu-core).
let labelFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
/// The status table is aligned in columns: the monospaced face of the same family.
let statusFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"

/// SDL's last error, as text.
private func sdlError() -> String {
    String(cString: SDL_GetError())
}

/// A texture with its size.
private struct SizedTexture {
    var texture: OpaquePointer
    var width: Int
    var height: Int
    /// The texture's pixel format (SDL_PIXELFORMAT_*), where it matters: the pictures'.
    var format: UInt32 = SDL_PIXELFORMAT_UNKNOWN.rawValue
}

/// The window's thread: owns SDL (video, window, renderer, textures, fonts), runs the event loop
/// and draws. Every member is touched on that thread only; SDL is initialised and quit here.
final class WindowLoop {
    private struct Participant {
        var id: UInt64
        var display: String
        var state: ParticipantState = []
        /// One streaming texture in ``WindowLoop/pictureFormat``, recreated when the picture size
        /// changes.
        var texture: SizedTexture?
        /// The size the newest picture was decoded at (the texture's may be smaller).
        var decodedSize: PictureSize?
        var label: SizedTexture?
    }

    private let window: OpaquePointer
    private let renderer: OpaquePointer
    private let labelFont: OpaquePointer?
    private let statusFont: OpaquePointer?
    private let mailbox: Mailbox
    private let commands: AsyncStream<WindowCommand>.Continuation
    /// The SDL event type of the mailbox's wake-up.
    private let wakeEvent: UInt32
    private var participants: [UInt64: Participant] = [:]
    private var order: [UInt64] = []
    private var speaker: UInt64?
    private var statusLines: [String] = []
    private var statusTextures: [SizedTexture] = []
    private var statusShown = false
    /// The lines changed since their textures were made (made only when shown).
    private var statusStale = false
    private var indicatorLabels: [Indicator: SizedTexture] = [:]
    private var fullscreen = false
    private var leaveSent = false
    private var running = true
    private var dirty = true
    private var pacing: PresentPacing
    /// The pixel format of the pictures' textures.
    ///
    /// IYUV where the renderer converts it itself (on the GPU). With SDL's software renderer, the
    /// window's own format: each picture is converted once on arrival (`SDL_ConvertPixels`)
    /// straight into the texture, and every present copies it with a same-format stretch. An
    /// IYUV texture there costs an extra copy of the planes per picture and a copy into the
    /// window that converts each pixel's format again, at every present. With the whole-window
    /// clear that `drawScene` no longer does, that was a fifth of the window thread's CPU
    /// (bench/devices, `PARTS=cpu PERF=FILE`).
    private var pictureFormat: UInt32
    /// SDL's software renderer: pictures are best scaled down before they arrive (the window
    /// publishes their boxes).
    private let softwareRenderer: Bool
    /// The boxes last published to ``Mailbox/boxes``.
    private var publishedBoxes: [UInt64: PictureSize] = [:]

    init(
        title: String,
        width: Int,
        height: Int,
        mailbox: Mailbox,
        commands: AsyncStream<WindowCommand>.Continuation
    ) throws(WindowError) {
        // SDL must leave SIGINT and SIGTERM to the application, which stops the call on them.
        SDL_SetHint(SDL_HINT_NO_SIGNAL_HANDLERS, "1")
        // A window on the desktop's display server, never SDL's fallbacks (KMS/DRM would take
        // over a console): X11 where DISPLAY is set (XWayland too), Wayland where only it is.
        // SDL_VIDEODRIVER in the environment still wins.
        if getenv("SDL_VIDEODRIVER") == nil {
            let wayland = getenv("DISPLAY") == nil && getenv("WAYLAND_DISPLAY") != nil
            SDL_SetHint(SDL_HINT_VIDEODRIVER, wayland ? "wayland" : "x11")
        }
        guard SDL_Init(SDL_INIT_VIDEO) == 0 else {
            throw WindowError(stage: "cannot open the display", reason: sdlError())
        }
        let wakeEvent = SDL_RegisterEvents(1)
        guard wakeEvent != UInt32.max else {
            let reason = sdlError()
            SDL_Quit()
            throw WindowError(stage: "cannot register an event", reason: reason)
        }
        guard
            let window = SDL_CreateWindow(
                title,
                0,
                0,
                Int32(clamping: width),
                Int32(clamping: height),
                SDL_WINDOW_RESIZABLE.rawValue
            )
        else {
            let reason = sdlError()
            SDL_Quit()
            throw WindowError(stage: "cannot create the window", reason: reason)
        }
        guard let renderer = Self.makeRenderer(window) else {
            let reason = sdlError()
            SDL_DestroyWindow(window)
            SDL_Quit()
            throw WindowError(stage: "cannot create a renderer", reason: reason)
        }
        // Labels are a nicety: without the font (or SDL_ttf) the window still shows the video.
        if TTF_WasInit() != 0 || TTF_Init() == 0 {
            labelFont = TTF_OpenFont(labelFontPath, 16)
            statusFont = TTF_OpenFont(statusFontPath, 14)
        } else {
            labelFont = nil
            statusFont = nil
        }
        self.window = window
        self.renderer = renderer
        self.mailbox = mailbox
        self.commands = commands
        self.wakeEvent = wakeEvent
        var mode = SDL_DisplayMode()
        let refreshRate = SDL_GetWindowDisplayMode(window, &mode) == 0 ? Int(mode.refresh_rate) : 0
        pacing = PresentPacing(refreshRate: refreshRate)
        pictureFormat = Self.pictureFormat(renderer: renderer, window: window)
        softwareRenderer = Self.rendererName(renderer) == "software"
        mailbox.open {
            var event = SDL_Event()
            event.type = wakeEvent
            _ = SDL_PushEvent(&event)
        }
    }

    /// SDL's first renderer, unless it is OpenGL drawn by Mesa's software rasteriser (llvmpipe on
    /// Xvfb, VNC or a machine without a GPU driver): then SDL's own software renderer. llvmpipe
    /// runs its shaders on worker threads and cost about two thirds of the person client's CPU in
    /// a 4-participant call, where the software renderer's YUV conversion and XShm blit are far
    /// cheaper. SDL_RENDER_DRIVER in the environment still wins.
    private static func makeRenderer(_ window: OpaquePointer) -> OpaquePointer? {
        guard let renderer = SDL_CreateRenderer(window, -1, 0) else { return nil }
        guard getenv("SDL_RENDER_DRIVER") == nil, isSoftwareOpenGL(renderer) else { return renderer }
        SDL_DestroyRenderer(renderer)
        // The software renderer draws into the window's framebuffer, which SDL would otherwise
        // make an OpenGL texture again: X11's shared-memory image instead.
        SDL_SetHint(SDL_HINT_FRAMEBUFFER_ACCELERATION, "0")
        return SDL_CreateRenderer(window, -1, SDL_RENDERER_SOFTWARE.rawValue)
            ?? SDL_CreateRenderer(window, -1, 0)
    }

    /// The pictures' texture format for `renderer` (see ``pictureFormat``): the window's when it
    /// is SDL's software renderer drawing into a 32-bit RGB window without alpha, else IYUV.
    private static func pictureFormat(renderer: OpaquePointer, window: OpaquePointer) -> UInt32 {
        guard rendererName(renderer) == "software" else { return SDL_PIXELFORMAT_IYUV.rawValue }
        let windowFormat = SDL_GetWindowPixelFormat(window)
        let direct = [SDL_PIXELFORMAT_RGB888.rawValue, SDL_PIXELFORMAT_BGR888.rawValue]
        return direct.contains(windowFormat) ? windowFormat : SDL_PIXELFORMAT_IYUV.rawValue
    }

    /// SDL's name of `renderer` ("software", "opengl", ...); nil when SDL cannot tell.
    private static func rendererName(_ renderer: OpaquePointer) -> String? {
        var info = SDL_RendererInfo()
        guard SDL_GetRendererInfo(renderer, &info) == 0, let name = info.name else { return nil }
        return String(cString: name)
    }

    /// Whether `renderer` is an OpenGL one whose context Mesa rasterises in software.
    private static func isSoftwareOpenGL(_ renderer: OpaquePointer) -> Bool {
        guard rendererName(renderer)?.hasPrefix("opengl") == true,
            let getString = SDL_GL_GetProcAddress("glGetString")
        else { return false }
        // glGetString(GL_RENDERER), on the context the renderer made current.
        typealias GetString = @convention(c) (UInt32) -> UnsafePointer<CChar>?
        let glRenderer: UInt32 = 0x1F01
        guard let text = unsafeBitCast(getString, to: GetString.self)(glRenderer) else { return false }
        return isSoftwareRasteriser(String(cString: text))
    }

    /// Whether an OpenGL renderer string (GL_RENDERER) names one of Mesa's software rasterisers.
    static func isSoftwareRasteriser(_ glRenderer: String) -> Bool {
        let description = glRenderer.lowercased()
        return ["llvmpipe", "softpipe", "software rasterizer", "swrast"].contains { description.contains($0) }
    }

    /// Waits for events (the mailbox's wake-up, keys, the window's own) and draws when something
    /// changed, at most once per display refresh (``PresentPacing``), until ``CallWindow/close()``.
    func run() {
        var event = SDL_Event()
        apply(mailbox.take())
        while running {
            var timeout = PresentPacing.idleWait
            switch pacing.decide(dirty: dirty, now: SDL_GetTicks64()) {
            case .present: render()
            case .wait(let milliseconds): timeout = milliseconds
            }
            // Changes arrive as events; the timeout is the next present's time (or a guard).
            guard SDL_WaitEventTimeout(&event, timeout) != 0 else { continue }
            handle(event)
            while running, SDL_PollEvent(&event) != 0 { handle(event) }
        }
        let left = mailbox.close {
            for participant in participants.values { destroy(participant) }
            for texture in statusTextures { SDL_DestroyTexture(texture.texture) }
            for texture in indicatorLabels.values { SDL_DestroyTexture(texture.texture) }
            if let labelFont { TTF_CloseFont(labelFont) }
            if let statusFont { TTF_CloseFont(statusFont) }
            TTF_Quit()
            SDL_DestroyRenderer(renderer)
            SDL_DestroyWindow(window)
            SDL_Quit()
        }
        for waiter in left.snapshots { waiter.resume(returning: nil) }
    }

    private func handle(_ event: SDL_Event) {
        switch event.type {
        case wakeEvent:
            apply(mailbox.take())
        case SDL_QUIT.rawValue:
            leave()
        case SDL_WINDOWEVENT.rawValue:
            if event.window.event == UInt8(SDL_WINDOWEVENT_CLOSE.rawValue) {
                leave()
            } else {
                dirty = true
            }
        case SDL_KEYDOWN.rawValue:
            guard event.key.`repeat` == 0 else { return }
            key(event.key.keysym.sym)
        case SDL_KEYUP.rawValue:
            if event.key.keysym.sym == SDL_Keycode(SDLK_TAB.rawValue) {
                statusShown = false
                dirty = true
            }
        default:
            break
        }
    }

    private func key(_ symbol: SDL_Keycode) {
        switch symbol {
        case SDL_Keycode(SDLK_m.rawValue): commands.yield(.toggleMute)
        case SDL_Keycode(SDLK_v.rawValue): commands.yield(.toggleCamera)
        case SDL_Keycode(SDLK_s.rawValue): commands.yield(.toggleScreenShare)
        case SDL_Keycode(SDLK_q.rawValue): leave()
        case SDL_Keycode(SDLK_f.rawValue):
            fullscreen.toggle()
            SDL_SetWindowFullscreen(window, fullscreen ? SDL_WINDOW_FULLSCREEN_DESKTOP.rawValue : 0)
            commands.yield(.toggleFullscreen)
            dirty = true
        case SDL_Keycode(SDLK_TAB.rawValue):
            statusShown = true
            dirty = true
        default:
            break
        }
    }

    private func leave() {
        guard !leaveSent else { return }
        leaveSent = true
        commands.yield(.leave)
    }

    private func apply(_ mail: WindowMail) {
        for change in mail.changes {
            switch change {
            case .joined(let id, let display):
                if var participant = participants[id] {
                    if participant.display != display {
                        participant.display = display
                        if let label = participant.label { SDL_DestroyTexture(label.texture) }
                        participant.label = text(display, font: labelFont)
                        participants[id] = participant
                    }
                } else {
                    participants[id] = Participant(id: id, display: display, label: text(display, font: labelFont))
                    order.append(id)
                }
            case .left(let id):
                if let participant = participants.removeValue(forKey: id) { destroy(participant) }
                order.removeAll { $0 == id }
                if speaker == id { speaker = nil }
            case .state(let id, let state):
                participants[id]?.state = state
            case .speaker(let id):
                speaker = id
            case .status(let lines):
                guard lines != statusLines else { continue }
                statusLines = lines
                statusStale = true
            }
        }
        for (id, picture) in mail.pictures { upload(picture, for: id) }
        pacing.picturesArrived(mail.pictureCounts, now: SDL_GetTicks64())
        for (key, down) in mail.keys { pushKey(key, down: down) }
        if mail.stop { running = false }
        if !mail.changes.isEmpty || !mail.pictures.isEmpty { dirty = true }
        if !mail.snapshots.isEmpty {
            let snapshot = readBack()
            for waiter in mail.snapshots { waiter.resume(returning: snapshot) }
        }
    }

    /// Hands a test's key press to the handler a real one reaches, at once: a press pushed into
    /// SDL's queue instead would be handled only after a snapshot asked for in the same batch.
    private func pushKey(_ key: WindowKey, down: Bool) {
        let symbol: SDL_KeyCode =
            switch key {
            case .m: SDLK_m
            case .v: SDLK_v
            case .s: SDLK_s
            case .f: SDLK_f
            case .q: SDLK_q
            case .tab: SDLK_TAB
            }
        var event = SDL_Event()
        event.type = down ? SDL_KEYDOWN.rawValue : SDL_KEYUP.rawValue
        event.key.state = UInt8(down ? SDL_PRESSED : SDL_RELEASED)
        event.key.keysym.sym = SDL_Keycode(symbol.rawValue)
        handle(event)
    }

    /// Copies a picture into the participant's texture (only when it is new, not at every draw).
    private func upload(_ decoded: DecodedPicture, for id: UInt64) {
        guard var participant = participants[id] else { return }
        let picture = decoded.picture
        participant.decodedSize = decoded.decodedSize
        if let texture = participant.texture,
            texture.width != picture.width || texture.height != picture.height || texture.format != pictureFormat
        {
            SDL_DestroyTexture(texture.texture)
            participant.texture = nil
        }
        if participant.texture == nil {
            guard
                let texture = SDL_CreateTexture(
                    renderer,
                    pictureFormat,
                    Int32(SDL_TEXTUREACCESS_STREAMING.rawValue),
                    Int32(clamping: picture.width),
                    Int32(clamping: picture.height)
                )
            else {
                participants[id] = participant  // without the texture destroyed above
                return
            }
            participant.texture = SizedTexture(
                texture: texture,
                width: picture.width,
                height: picture.height,
                format: pictureFormat
            )
        }
        participants[id] = participant
        guard let texture = participant.texture else { return }
        let converted = picture.data.withUnsafeBufferPointer { planes -> Bool in
            guard let base = planes.baseAddress else { return true }
            guard texture.format != SDL_PIXELFORMAT_IYUV.rawValue else {
                let chromaPitch = Int32(picture.width / 2)
                _ = SDL_UpdateYUVTexture(
                    texture.texture,
                    nil,
                    base,
                    Int32(picture.width),
                    base + picture.uOffset,
                    chromaPitch,
                    base + picture.vOffset,
                    chromaPitch
                )
                return true
            }
            var pixels: UnsafeMutableRawPointer?
            var pitch: Int32 = 0
            guard SDL_LockTexture(texture.texture, nil, &pixels, &pitch) == 0, let pixels else { return false }
            defer { SDL_UnlockTexture(texture.texture) }
            // Packed I420: the U and V planes follow the Y plane at half its pitch, as SDL expects.
            return SDL_ConvertPixels(
                Int32(clamping: picture.width),
                Int32(clamping: picture.height),
                SDL_PIXELFORMAT_IYUV.rawValue,
                base,
                Int32(clamping: picture.width),
                texture.format,
                pixels,
                pitch
            ) == 0
        }
        guard !converted else { return }
        // This SDL cannot convert into the window's format after all: IYUV textures from now on.
        pictureFormat = SDL_PIXELFORMAT_IYUV.rawValue
        upload(decoded, for: id)
    }

    private func destroy(_ participant: Participant) {
        if let texture = participant.texture { SDL_DestroyTexture(texture.texture) }
        if let label = participant.label { SDL_DestroyTexture(label.texture) }
    }

    /// White text on a transparent background; nil without a font.
    private func text(_ string: String, font: OpaquePointer?) -> SizedTexture? {
        guard let font, let surface = TTF_RenderUTF8_Blended(font, string, SDL_Color(r: 255, g: 255, b: 255, a: 255))
        else { return nil }
        defer { SDL_FreeSurface(surface) }
        guard let texture = SDL_CreateTextureFromSurface(renderer, surface) else { return nil }
        return SizedTexture(texture: texture, width: Int(surface.pointee.w), height: Int(surface.pointee.h))
    }

    private var outputSize: (width: Int, height: Int) {
        var width: Int32 = 0
        var height: Int32 = 0
        SDL_GetRendererOutputSize(renderer, &width, &height)
        return (Int(width), Int(height))
    }

    /// The geometry of the current frame.
    private func geometry() -> [UInt64: WindowSnapshot.Tile] {
        let (width, height) = outputSize
        let tiles = CallWindowLayout.tiles(count: order.count, width: width, height: height)
        var geometry: [UInt64: WindowSnapshot.Tile] = [:]
        for (id, tile) in zip(order, tiles) {
            guard let participant = participants[id] else { continue }
            let picture = participant.texture.map {
                CallWindowLayout.pictureRect(in: tile, pictureWidth: $0.width, pictureHeight: $0.height)
            }
            geometry[id] = WindowSnapshot.Tile(
                tile: tile,
                picture: picture,
                indicators: CallWindowLayout.indicatorRects(in: tile, state: participant.state)
            )
        }
        return geometry
    }

    private func render() {
        _ = drawScene()
        SDL_RenderPresent(renderer)
    }

    /// Draws every tile (and the status table when shown) into the back buffer.
    private func drawScene() -> [UInt64: WindowSnapshot.Tile] {
        dirty = false
        let geometry = geometry()
        let (width, height) = outputSize
        let pictures = geometry.values.compactMap(\.picture)
        for rect in CallWindowLayout.uncovered(width: width, height: height, by: pictures) {
            fill(rect, (24, 24, 28, 255))
        }
        var shown: [UInt64: ShownPicture] = [:]
        for id in order {
            guard let participant = participants[id], let tile = geometry[id] else { continue }
            draw(participant, tile)
            if let texture = participant.texture, let picture = tile.picture {
                shown[id] = ShownPicture(
                    pictureWidth: participant.decodedSize?.width ?? texture.width,
                    pictureHeight: participant.decodedSize?.height ?? texture.height,
                    drawnWidth: picture.width,
                    drawnHeight: picture.height
                )
            }
        }
        mailbox.shown.withLock { $0 = shown }
        if softwareRenderer {
            // They change with the layout only: published (under the decoder's lock) then.
            let boxes = geometry.mapValues { CallWindowLayout.pictureBox(in: $0.tile) }
            if boxes != publishedBoxes {
                publishedBoxes = boxes
                mailbox.boxes.withLock { $0 = boxes }
            }
        }
        if statusShown { drawStatus() }
        return geometry
    }

    private func draw(_ participant: Participant, _ geometry: WindowSnapshot.Tile) {
        let tile = geometry.tile
        if let texture = participant.texture, let picture = geometry.picture {
            var destination = sdlRect(picture)
            SDL_RenderCopy(renderer, texture.texture, nil, &destination)
        } else {
            fill(
                TileRect(
                    x: tile.x + CallWindowLayout.border,
                    y: tile.y + CallWindowLayout.border,
                    width: tile.width - 2 * CallWindowLayout.border,
                    height: tile.height - 2 * CallWindowLayout.border
                ),
                (48, 48, 56, 255)
            )
        }
        if participant.id == speaker {
            let border = CallWindowLayout.border
            let speaker = RGB.speaker
            let color = (speaker.red, speaker.green, speaker.blue, UInt8(255))
            fill(TileRect(x: tile.x, y: tile.y, width: tile.width, height: border), color)
            fill(TileRect(x: tile.x, y: tile.y + tile.height - border, width: tile.width, height: border), color)
            fill(TileRect(x: tile.x, y: tile.y, width: border, height: tile.height), color)
            fill(TileRect(x: tile.x + tile.width - border, y: tile.y, width: border, height: tile.height), color)
        }
        if let label = participant.label {
            let x = tile.x + CallWindowLayout.border + 6
            let y = tile.y + tile.height - CallWindowLayout.border - label.height - 6
            fill(TileRect(x: x - 4, y: y - 2, width: label.width + 8, height: label.height + 4), (0, 0, 0, 160))
            copy(label, x: x, y: y)
        }
        for (indicator, rect) in geometry.indicators {
            let color = indicator.color
            fill(rect, (color.red, color.green, color.blue, 255))
            if indicatorLabels[indicator] == nil { indicatorLabels[indicator] = text(indicator.text, font: statusFont) }
            if let label = indicatorLabels[indicator] {
                copy(label, x: rect.x + (rect.width - label.width) / 2, y: rect.y + (rect.height - label.height) / 2)
            }
        }
    }

    private func drawStatus() {
        if statusStale {
            statusStale = false
            for texture in statusTextures { SDL_DestroyTexture(texture.texture) }
            statusTextures = statusLines.compactMap { text($0.isEmpty ? " " : $0, font: statusFont) }
        }
        guard !statusTextures.isEmpty else { return }
        let width = statusTextures.map(\.width).max() ?? 0
        let height = statusTextures.reduce(0) { $0 + $1.height }
        fill(TileRect(x: 8, y: 8, width: width + 16, height: height + 16), (0, 0, 0, 200))
        var y = 16
        for texture in statusTextures {
            copy(texture, x: 16, y: y)
            y += texture.height
        }
    }

    /// Fills `rect`: blended when `color` is translucent, a plain fill (cheaper in software)
    /// when it is opaque.
    private func fill(_ rect: TileRect, _ color: (UInt8, UInt8, UInt8, UInt8)) {
        SDL_SetRenderDrawBlendMode(renderer, color.3 == 255 ? SDL_BLENDMODE_NONE : SDL_BLENDMODE_BLEND)
        SDL_SetRenderDrawColor(renderer, color.0, color.1, color.2, color.3)
        var sdl = sdlRect(rect)
        SDL_RenderFillRect(renderer, &sdl)
    }

    private func copy(_ texture: SizedTexture, x: Int, y: Int) {
        var destination = SDL_Rect(x: Int32(x), y: Int32(y), w: Int32(texture.width), h: Int32(texture.height))
        SDL_RenderCopy(renderer, texture.texture, nil, &destination)
    }

    private func sdlRect(_ rect: TileRect) -> SDL_Rect {
        SDL_Rect(
            x: Int32(clamping: rect.x),
            y: Int32(clamping: rect.y),
            w: Int32(clamping: rect.width),
            h: Int32(clamping: rect.height)
        )
    }

    /// Draws the frame again and reads it back before it is presented.
    private func readBack() -> WindowSnapshot? {
        let geometry = drawScene()
        let (width, height) = outputSize
        guard width > 0, height > 0 else { return nil }
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        let rc = rgb.withUnsafeMutableBytes {
            SDL_RenderReadPixels(renderer, nil, SDL_PIXELFORMAT_RGB24.rawValue, $0.baseAddress, Int32(width * 3))
        }
        SDL_RenderPresent(renderer)
        guard rc == 0 else { return nil }
        return WindowSnapshot(
            width: width,
            height: height,
            rgb: rgb,
            order: order,
            tiles: geometry,
            renderer: Self.rendererName(renderer) ?? "unknown",
            pictureFormat: String(cString: SDL_GetPixelFormatName(pictureFormat))
        )
    }
}
