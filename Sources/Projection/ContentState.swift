public import DeliveryActivityContract

/// The dynamic part of the Live Activity: the client package's type itself, so that the projection
/// cannot drift from what the app decodes.
public typealias ContentState = DeliveryAttributes.ContentState
