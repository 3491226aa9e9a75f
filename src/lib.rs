//! memloop
