import JanusProtocol
import Testing

@testable import ConclaveCall

@Suite struct LayerSelectionTests {
    @Test func plainLayersSetEveryonesAndNamedOnesOneParticipants() throws {
        let selection = try LayerSelection(parsing: ["low", "42=high", "Bob=medium", "carol=auto"], standard: .auto)
        #expect(selection.standard == .fixed(.low))
        #expect(selection.layer(forDisplay: "42:Alice") == .fixed(.high), "by user id")
        #expect(selection.layer(forDisplay: "7:Bob") == .fixed(.medium), "by name")
        #expect(selection.layer(forDisplay: "carol") == .auto, "a display without a user id")
        #expect(selection.layer(forDisplay: "8:Dave") == .fixed(.low))
        #expect(selection.layer(forDisplay: nil) == .fixed(.low))
        #expect(try LayerSelection(parsing: [], standard: .fixed(.high)).layer(forDisplay: "1:A") == .fixed(.high))
        #expect(try LayerSelection(parsing: ["HIGH", "medium"], standard: .auto).standard == .fixed(.medium))
    }

    @Test func autoStartsHighAndFixedLayersStartWhereTheyAre() {
        #expect(VideoLayer.auto.initialSubstream == .high)
        #expect(VideoLayer.fixed(.low).initialSubstream == .low)
        #expect(VideoLayer.fixed(.medium).description == "medium" && VideoLayer.auto.description == "auto")
    }

    @Test func badValuesAreOneClearError() {
        for (option, reason) in [
            ("huge", "not a layer"), ("", "not a layer"), ("42=", "not a layer"), ("=low", "no participant"),
            ("42=2", "not a layer"),
        ] {
            #expect(
                throws: LayerSelectionError.self,
                "\(option)",
                performing: { try LayerSelection(parsing: [option], standard: .auto) }
            )
            do {
                _ = try LayerSelection(parsing: [option], standard: .auto)
            } catch {
                #expect(error.description.contains(reason) && error.description.contains("--layer"), "\(error)")
            }
        }
    }

    @Test func theStatusShowsTheLayerReceivedPerParticipant() {
        let tracker = CallStatusTracker()
        // A switch reported before the feed's announcement still belongs to the participant.
        tracker.layerReceived(feedID: 5, substream: .low)
        tracker.participantJoined(feedID: 5, display: "5:Eve")
        tracker.participantJoined(feedID: 6, display: "6:Frank")
        tracker.layerReceived(feedID: 5, substream: .high)
        let status = tracker.snapshot(loss: [:]).participants
        #expect(status.first { $0.id == "5" }?.layer == "high")
        #expect(status.first { $0.id == "6" }?.layer == nil, "no simulcast, no layer")
        #expect(status.count == 2)
    }
}
