import FoundationEssentials
import HTTPServer
import OrderDomain
import Storage

extension DeliveryService {
    /// `POST /v1/customers/{customerId}/credentials`: the merchant's backend mints a credential for one
    /// of its signed-in customers and hands it to that customer's app (as payment APIs hand a mobile
    /// app an ephemeral customer key). With it the app registers its push-to-start token, and the
    /// token of an activity a `start` push created, for this merchant's orders of this customer only.
    ///
    /// - Note: Not replayed for an `Idempotency-Key`: the answer carries the secret, which is never
    ///   stored. A retried request mints a second credential; the first one simply goes unused.
    func createCustomerCredential(_ call: Call) throws -> HTTPResponse {
        let customerID = call.parameter("customerId")
        let body = call.request.body.isEmpty ? [:] : try jsonObject(call.request)
        var reader = FieldReader()
        checkIdentifier(customerID, "customerId", &reader)
        let merchantID: String?
        switch call.caller {
        case .staff(.merchant(let own), _):
            if let named = reader.string(body, "merchantId"), named != own {
                throw APIError.forbidden("a merchant key mints credentials only for its own customers")
            }
            merchantID = own
        case .staff(.admin, _):
            merchantID = reader.require(reader.identifier(body, "merchantId"), "merchantId")
        case .staff(.rider, _), .customer, .customerAccount:
            throw APIError.forbidden("customer credentials are minted by the merchant's backend, with its key")
        }
        try reader.finish()
        guard let merchantID else { throw APIError.internalError() }
        let minted = Credentials.newCustomerCredential(merchantID: merchantID, customerID: customerID, now: call.now)
        try store.createCustomerCredential(minted.record)
        var response = json(
            201,
            .object([
                "id": .string(minted.record.id), "credential": .string(minted.credential),
                "merchantId": .string(merchantID), "customerId": .string(customerID), "createdAt": .time(call.now),
            ]))
        response.headers.append(("Cache-Control", "no-store"))
        return response
    }

    /// `DELETE /v1/customers/{customerId}/credentials/{credentialId}`: the customer signed out; the
    /// credential stops working and the devices registered with it get no more activities.
    func revokeCustomerCredential(_ call: Call) throws -> HTTPResponse {
        let customerID = call.parameter("customerId")
        let credentialID = call.parameter("credentialId")
        let merchantID: String
        switch call.caller {
        case .staff(.merchant(let own), _):
            merchantID = own
        case .staff(.admin, _):
            guard let record = try store.customerCredential(id: credentialID) else {
                throw APIError.notFound("no such credential")
            }
            merchantID = record.merchantID
        case .staff(.rider, _), .customer, .customerAccount:
            throw APIError.forbidden("customer credentials are revoked by the merchant's backend, with its key")
        }
        guard
            try store.revokeCustomerCredential(
                id: credentialID, merchantID: merchantID, customerID: customerID, now: call.now)
        else { throw APIError.notFound("no such credential") }
        return HTTPResponse(status: 204)
    }
}
