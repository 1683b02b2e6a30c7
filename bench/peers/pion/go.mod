module pion-peer
