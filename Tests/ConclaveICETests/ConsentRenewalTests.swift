import Testing

@testable import ConclaveICE

/// When a lost consent is renewed on the pair in use, on exact times (seconds since an origin).
@Suite("Consent renewal")
struct ConsentRenewalTests {
    @Test func aConsentLostWhileMediaArrivesIsRenewed() {
        var renewal = ConsentRenewal()
        #expect(renewal.decide(at: .seconds(60), lastInbound: .seconds(59.98), relayed: false) == .renew)
    }

    @Test func withoutRecentMediaTheLossIsAnOutage() {
        var renewal = ConsentRenewal()
        #expect(renewal.decide(at: .seconds(60), lastInbound: .seconds(56.9), relayed: false) == .fail(.noRecentMedia))
        #expect(renewal.decide(at: .seconds(60), lastInbound: nil, relayed: false) == .fail(.noRecentMedia))
        // Exactly at the window's edge it still counts as arriving.
        #expect(renewal.decide(at: .seconds(60), lastInbound: .seconds(57), relayed: false) == .renew)
    }

    @Test func aRelayedPairIsNeverRenewed() {
        var renewal = ConsentRenewal()
        #expect(renewal.decide(at: .seconds(60), lastInbound: .seconds(60), relayed: true) == .fail(.relayed))
    }

    /// A path whose way out broke loses consent again 10 s after a renewal: that second loss
    /// fails, so the call's recovery still runs, about 20 s after the break.
    @Test func aSecondLossWithinThirtySecondsFails() {
        var renewal = ConsentRenewal()
        #expect(renewal.decide(at: .seconds(100), lastInbound: .seconds(100), relayed: false) == .renew)
        #expect(
            renewal.decide(at: .seconds(110), lastInbound: .seconds(110), relayed: false) == .fail(.renewedRecently)
        )
        #expect(
            renewal.decide(at: .seconds(129.9), lastInbound: .seconds(129.9), relayed: false)
                == .fail(.renewedRecently)
        )
        #expect(renewal.decide(at: .seconds(130), lastInbound: .seconds(130), relayed: false) == .renew)
    }

    /// A refusal does not count as a renewal: the next loss with media arriving is renewed.
    @Test func refusalsDoNotUseUpTheRenewal() {
        var renewal = ConsentRenewal()
        #expect(renewal.decide(at: .seconds(10), lastInbound: nil, relayed: false) == .fail(.noRecentMedia))
        #expect(renewal.decide(at: .seconds(20), lastInbound: .seconds(20), relayed: false) == .renew)
    }
}
