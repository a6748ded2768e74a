-- What a device does with its runs (core::confinement::Offer as JSON), from its hello.
ALTER TABLE devices ADD COLUMN sandbox TEXT;
